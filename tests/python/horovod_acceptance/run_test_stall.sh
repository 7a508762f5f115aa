#!/usr/bin/env bash
# Runs Horovod's own stall test (test/integration/test_stall.py: stall check
# 2 s, shutdown 5 s, rank 1 arriving 10 s late) against khorovod.torch through
# khorovodrun with Horovod's command line (horovodrun -np 2 -H localhost:2
# --gloo python test_stall.py), only its imports changed. Nothing of Horovod
# is vendored or downloaded: pass a Horovod checkout (or the test file).
# Without one the script skips (exit 77) saying why.
#
# Usage: run_test_stall.sh HOROVOD_CHECKOUT_OR_TEST_FILE [BUILD_DIR]
#   (an empty first argument: $KHOROVOD_HOROVOD_SOURCE)
# Passes (exit 0) when the job exits 0 within Horovod's 45 s alarm and rank 0
# reported the stall (the warning after 2 s and the shutdown after 5 s).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
src=${1:-${KHOROVOD_HOROVOD_SOURCE:-}}
build=$(cd "${2:-$root/build/release}" 2>/dev/null && pwd)
python=${KHOROVOD_TEST_PYTHON:-/usr/bin/python3}
launcher=${KHOROVODRUN:-$build/bin/khorovodrun}

if [ -z "$src" ]; then echo "SKIP: no Horovod checkout given (usage: $0 HOROVOD_CHECKOUT [BUILD_DIR])"; exit 77; fi
test_file=$src; [ -d "$src" ] && test_file=$src/test/integration/test_stall.py
[ -f "$test_file" ] || { echo "SKIP: $test_file not found (need Horovod's test/integration/test_stall.py)"; exit 77; }
[ -x "$launcher" ] || { echo "FAIL: khorovodrun not found at $launcher"; exit 1; }

work=$(mktemp -d /tmp/khorovod-hvd-stall.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The import lines only; horovod.common.util.env (a context manager setting
# environment variables) is defined in its place with the standard library.
sed -e 's/^import horovod\.torch as hvd/import khorovod.torch as hvd/' \
    -e 's/^from horovod\.common\.util import env$/import contextlib, os\n@contextlib.contextmanager\ndef env(**kw):\n    old = {k: os.environ.get(k) for k in kw}\n    os.environ.update(kw)\n    try:\n        yield\n    finally:\n        for k, v in old.items():\n            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)/' \
    "$test_file" > "$work/test_stall.py"
if grep -n "^\s*\(import\|from\) horovod" "$work/test_stall.py"; then echo "FAIL: horovod imports left"; exit 1; fi

export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
start=$(date +%s)
timeout --kill-after=10 60 "$launcher" -np 2 -H localhost:2 --gloo "$python" "$work/test_stall.py" > "$work/log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
cat "$work/log"
grep -q "\[0\]<stderr>:.*WARNING" "$work/log"; warned=$?
grep -q "\[0\]<stderr>:.*ERROR" "$work/log"; shut=$?
echo "test_stall: rc=$rc seconds=$secs rank0_warning=$([ $warned = 0 ] && echo yes || echo no) rank0_shutdown=$([ $shut = 0 ] && echo yes || echo no)"
[ $rc = 0 ] && [ $warned = 0 ] && [ $shut = 0 ]
