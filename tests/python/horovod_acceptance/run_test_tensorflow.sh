#!/usr/bin/env bash
# Runs one of Horovod's own TensorFlow test files (test/parallel/
# test_tensorflow.py, test_tensorflow2_keras.py or test_tensorflow_keras.py)
# against khorovod.tensorflow at N ranks through khorovodrun, with only its
# import lines changed (horovod.X -> khorovod.X). Nothing of Horovod is
# vendored and nothing is downloaded: the caller passes a Horovod checkout;
# without one the script skips (exit 77, ctest's SKIP_RETURN_CODE).
#
# Usage: run_test_tensorflow.sh HOROVOD_CHECKOUT TEST_NAME [NP] [BUILD_DIR] [-- pytest args]
#   TEST_NAME: test_tensorflow | test_tensorflow2_keras | test_tensorflow_keras
#   (an empty first argument: $KHOROVOD_HOROVOD_SOURCE; KHOROVOD_TEST_PYTHON
#   must have TensorFlow, pytest and parameterized; the whole run is bounded
#   by $KHOROVOD_ACCEPTANCE_TIMEOUT seconds, default 900)
# Prints each rank's counts and failing tests, then
#   TEST_NAME: ranks=N passed=P failed=F skipped=S errors=E
# from rank 0's JUnit report; exits 0 only if no rank failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
src=${1:-${KHOROVOD_HOROVOD_SOURCE:-}}; name=${2:-test_tensorflow}; np=${3:-2}
build=$(cd "${4:-$root/build/release}" 2>/dev/null && pwd)
shift $(( $# < 4 ? $# : 4 ))
[ "${1:-}" = "--" ] && shift
python=${KHOROVOD_TEST_PYTHON:-/usr/bin/python3}
launcher=${KHOROVODRUN:-$build/bin/khorovodrun}

if [ -z "$src" ]; then
  echo "SKIP: no Horovod checkout given (usage: $0 HOROVOD_CHECKOUT TEST_NAME [NP] [BUILD_DIR])"; exit 77
fi
case $name in
  test_tensorflow|test_tensorflow2_keras|test_tensorflow_keras) ;;
  *) echo "FAIL: unknown test file $name"; exit 2 ;;
esac
for f in "$src/test/parallel/$name.py" "$src/test/parallel/base_test_tensorflow.py" "$src/test/utils/common.py"; do
  [ -f "$f" ] || { echo "SKIP: $f not found"; exit 77; }
done
"$python" -c 'import tensorflow, pytest, parameterized' 2>/dev/null || {
  echo "SKIP: $python lacks tensorflow, pytest or parameterized"; exit 77; }
[ -x "$launcher" ] || { echo "FAIL: khorovodrun not found at $launcher"; exit 1; }

work=$(mktemp -d /tmp/khorovod-hvd-accept.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/parallel" "$work/utils" "$work/reports"
# The import lines only. common.py's launcher helper (in_thread) and its
# optional imports are replaced by what Python ships, as for test_torch.
rewrite() {
  sed -e 's/^\(\s*\)import horovod\.\(tensorflow\|keras\|common\)\(\.[a-z_.]*\)\? as /\1import khorovod.\2\3 as /' \
      -e 's/^\(\s*\)from horovod\.\(tensorflow\|keras\|common\)/\1from khorovod.\2/' \
      -e 's/^\(\s*\)import horovod$/\1import khorovod as horovod/' "$1" > "$2"
}
rewrite "$src/test/parallel/$name.py" "$work/parallel/$name.py"
rewrite "$src/test/parallel/base_test_tensorflow.py" "$work/parallel/base_test_tensorflow.py"
sed -e 's/^import mock$/from unittest import mock/' \
    -e 's/^from horovod\.runner\.util\.threads import in_thread$/in_thread = None  # horovodrun helper, unused here/' \
    "$src/test/utils/common.py" > "$work/utils/common.py"
if grep -n "^\s*\(import\|from\) horovod" "$work/parallel/$name.py" "$work/parallel/base_test_tensorflow.py"; then
  echo "FAIL: imports of horovod left after the rewrite (above)"; exit 1
fi
diff "$src/test/parallel/$name.py" "$work/parallel/$name.py" | grep '^>' | sed 's/^/rewritten: /'

export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
cd "$work/parallel" || exit 1
timeout --kill-after=30 "${KHOROVOD_ACCEPTANCE_TIMEOUT:-900}" \
  "$launcher" -np "$np" /bin/sh -c \
  "exec $python -m pytest -v -p no:cacheprovider -rfEs --junitxml=$work/reports/rank-\$HOROVOD_RANK.xml $name.py \"\$@\"" \
  sh "$@"
rc=$?
"$python" "$here/junit_summary.py" "$work/reports" "$np" "$name"
exit $rc
