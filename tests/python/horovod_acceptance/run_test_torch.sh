#!/usr/bin/env bash
# Runs Horovod's own PyTorch test file (test/parallel/test_torch.py) against
# khorovod.torch at N ranks through khorovodrun, with only its imports
# changed. Nothing of Horovod is vendored in this repository and nothing is
# downloaded: the caller passes a Horovod checkout (or the test file; its
# test/utils/common.py is then looked for beside it). Without one the script
# skips (exit 77, ctest's SKIP_RETURN_CODE) saying why.
#
# Usage: run_test_torch.sh HOROVOD_CHECKOUT_OR_TEST_FILE [NP] [BUILD_DIR] [-- pytest args]
#   (an empty first argument: $KHOROVOD_HOROVOD_SOURCE; the whole run is
#   bounded by $KHOROVOD_ACCEPTANCE_TIMEOUT seconds, default 600)
# Prints each rank's pytest summary and a final line
#   test_torch: ranks=N passed=P failed=F skipped=S errors=E
# taken from rank 0's JUnit report; exits 0 only if no rank failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
src=${1:-${KHOROVOD_HOROVOD_SOURCE:-}}; np=${2:-2}; build=$(cd "${3:-$root/build/release}" 2>/dev/null && pwd)
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
python=${KHOROVOD_TEST_PYTHON:-/usr/bin/python3}
launcher=${KHOROVODRUN:-$build/bin/khorovodrun}

if [ -z "$src" ]; then
  echo "SKIP: no Horovod checkout given (usage: $0 HOROVOD_CHECKOUT [NP] [BUILD_DIR])"; exit 77
fi
if [ -d "$src" ]; then test_file=$src/test/parallel/test_torch.py; common=$src/test/utils/common.py
else test_file=$src; common=$(dirname "$src")/../utils/common.py
  [ -f "$common" ] || common=$(dirname "$src")/common.py; fi
for f in "$test_file" "$common"; do
  [ -f "$f" ] || { echo "SKIP: $f not found (need Horovod's test/parallel/test_torch.py and test/utils/common.py)"; exit 77; }
done
[ -x "$launcher" ] || { echo "FAIL: khorovodrun not found at $launcher"; exit 1; }

work=$(mktemp -d /tmp/khorovod-hvd-accept.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parallel" "$work/utils" "$work/reports"
# The import lines only: horovod.torch -> khorovod.torch. common.py's
# launcher helper (in_thread, unused by test_torch.py) and its optional
# imports are replaced by what Python ships.
sed -e 's/^import horovod\.torch as hvd/import khorovod.torch as hvd/' \
    -e 's/^from horovod\.torch/from khorovod.torch/' \
    -e 's/^import horovod$/import khorovod as horovod/' \
    "$test_file" > "$work/parallel/test_torch.py"
sed -e 's/^import mock$/from unittest import mock/' \
    -e 's/^import cloudpickle$/try:\n    import cloudpickle\nexcept ImportError:\n    import pickle as cloudpickle/' \
    -e 's/^from horovod\.runner\.util\.threads import in_thread$/in_thread = None  # horovodrun helper, unused by test_torch.py/' \
    "$common" > "$work/utils/common.py"
if grep -n "^\s*\(import\|from\) horovod" "$work/parallel/test_torch.py"; then
  echo "FAIL: imports of horovod left after the rewrite (above)"; exit 1
fi

export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
cd "$work/parallel" || exit 1
# Each rank writes its own JUnit report; rank 0's gives the counts.
timeout --kill-after=30 "${KHOROVOD_ACCEPTANCE_TIMEOUT:-600}" \
  "$launcher" -np "$np" /bin/sh -c \
  "exec $python -m pytest -v -p no:cacheprovider -rfE --junitxml=$work/reports/rank-\$HOROVOD_RANK.xml test_torch.py \"\$@\"" \
  sh "$@"
rc=$?
"$python" "$here/junit_summary.py" "$work/reports" "$np" test_torch
exit $rc
