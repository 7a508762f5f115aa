#!/usr/bin/env bash
# Runs Horovod's own elastic integration tests for one framework
# (test/integration/test_elastic_<framework>.py, its elastic_common.py and
# data/elastic_<framework>_main.py) against khorovod through khorovodrun:
#   torch             test_elastic_torch.py, khorovod.torch
#   tensorflow2       test_elastic_tensorflow2.py, khorovod.tensorflow
#   tensorflow_keras  test_elastic_tensorflow_keras.py, khorovod.tensorflow.keras
# Nothing of Horovod is vendored or downloaded: pass a Horovod checkout.
# Without one the script skips (exit 77) saying why.
#
# What is changed, exactly:
# - Imports: the data script's `import horovod.<module> as hvd` becomes
#   `import khorovod.<module> as hvd`; test/utils/common.py (copied beside the
#   tests, where elastic_common.py looks for it) gets `from unittest import
#   mock`, pickle for cloudpickle and a stub for horovodrun's in_thread
#   (unused here), as in run_test_torch.sh; the test file's `import mock`
#   finds a module `mock` that is unittest.mock.
# - The launcher: elastic_common.py runs horovodrun in-process
#   (horovod.runner.launch.parse_args and _run_elastic). A package `horovod`
#   written here, on the test process' PYTHONPATH only, provides those two
#   and the attributes the tests patch: _run_elastic runs
#   `khorovodrun --run-hosts-locally --discovery-interval-ms <the patched
#   DISCOVER_HOSTS_FREQUENCY_SECS> <horovodrun's arguments, unchanged>` and raises
#   RuntimeError with khorovodrun's own (unprefixed) output lines when it
#   exits non-zero. constants.py is the checkout's own file. `python` in the
#   command line is $KHOROVOD_TEST_PYTHON (a script on PATH).
#   Patched without effect: gloo_run._get_min_start_hosts (1; khorovodrun
#   starts as soon as --min-num-proc slots are discovered) and the driver's
#   ELASTIC_TIMEOUT_SECS (1 in test_reset_limit; it bounds only horovodrun's
#   wait for hosts, while khorovodrun's --elastic-timeout also bounds every
#   worker's wait for a generation, so passing 1 would change the scenario).
# - KHOROVOD_HVD_DISCOVERY_WAIT=S (a diagnosis, off by default) changes the
#   data script's --discovery-wait default from 3 to S seconds: how long
#   rank 0 polls state._host_messages for a host change, which khorovod
#   reports once the new workers have registered (after importing their
#   framework), while Horovod's driver reports it on discovery.
# - KHOROVOD_HVD_TF1_COMPAT=1 (off by default) lets the TF1 script of
#   test_elastic_tensorflow_keras.py start on TensorFlow 2: its session
#   setup `tf.ConfigProto(` and `tf.keras.backend.set_session(tf.Session(`
#   become their tf.compat.v1 names (Horovod runs that file only on TF1).
# - KHOROVOD_HVD_UNSKIP=1 also runs the tests that the test file skips
#   (Horovod issues 2030, 2908): their skipTest becomes a call of
#   elastic_common's version.
#
# Usage: run_test_elastic.sh HOROVOD_CHECKOUT FRAMEWORK [BUILD_DIR] [-- pytest args]
#   (an empty first argument: $KHOROVOD_HOROVOD_SOURCE; the run is bounded by
#   $KHOROVOD_ACCEPTANCE_TIMEOUT seconds, default 1500; KHOROVODRUN and
#   KHOROVOD_TEST_PYTHON, e.g. a venv's, replace BUILD_DIR's)
# Exits with pytest's status (0: every test not skipped passed).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
src=${1:-${KHOROVOD_HOROVOD_SOURCE:-}}; framework=${2:-torch}
build=$(cd "${3:-$root/build/release}" 2>/dev/null && pwd)
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
python=${KHOROVOD_TEST_PYTHON:-/usr/bin/python3}
launcher=${KHOROVODRUN:-$build/bin/khorovodrun}

case $framework in
  torch) module=torch; needs=torch ;;
  tensorflow2) module=tensorflow; needs=tensorflow ;;
  tensorflow_keras) module=tensorflow.keras; needs=tensorflow ;;
  *) echo "FAIL: unknown framework $framework (torch, tensorflow2, tensorflow_keras)"; exit 2 ;;
esac
test_file=test_elastic_$framework.py main=elastic_${framework}_main.py
if [ -z "$src" ]; then echo "SKIP: no Horovod checkout given (usage: $0 HOROVOD_CHECKOUT FRAMEWORK [BUILD_DIR])"; exit 77; fi
t=$src/test
for f in "$t/integration/$test_file" "$t/integration/elastic_common.py" \
         "$t/integration/data/$main" "$t/utils/common.py" "$src/horovod/runner/elastic/constants.py"; do
  [ -f "$f" ] || { echo "SKIP: $f not found (need a Horovod checkout)"; exit 77; }
done
[ -x "$launcher" ] || { echo "FAIL: khorovodrun not found at $launcher"; exit 1; }
"$python" -c "import $needs, psutil, pytest" || { echo "SKIP: $python lacks $needs, psutil or pytest"; exit 77; }

work=$(mktemp -d /tmp/khorovod-hvd-elastic.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/integration/data" "$work/shim/horovod/runner/elastic" "$work/shim/horovod/runner/common/util" "$work/bin"
if [ "${KHOROVOD_HVD_UNSKIP:-0}" = 1 ]; then
  sed -e "s/^\(\s*\)self\.skipTest('This test fails due to .*')$/\1getattr(BaseElasticTests, self._testMethodName)(self)/" \
    "$t/integration/$test_file" > "$work/integration/$test_file"
else cp "$t/integration/$test_file" "$work/integration/"; fi
cp "$t/integration/elastic_common.py" "$work/integration/"
discovery_wait=()
[ -n "${KHOROVOD_HVD_DISCOVERY_WAIT:-}" ] && \
  discovery_wait=(-e "s/^\(parser.add_argument('--discovery-wait', type=int, default=\)3,/\1$KHOROVOD_HVD_DISCOVERY_WAIT,/")
tf1_compat=()
[ "${KHOROVOD_HVD_TF1_COMPAT:-0}" = 1 ] && tf1_compat=(-e 's/\btf\.ConfigProto(/tf.compat.v1.ConfigProto(/' \
  -e 's/\btf\.keras\.backend\.set_session(tf\.Session(/tf.compat.v1.keras.backend.set_session(tf.compat.v1.Session(/')
sed -e "s/^import horovod\.$module as hvd\$/import khorovod.$module as hvd/" "${discovery_wait[@]}" "${tf1_compat[@]}" \
  "$t/integration/data/$main" > "$work/integration/data/$main"
sed -e 's/^import mock$/from unittest import mock/' \
    -e 's/^import cloudpickle$/try:\n    import cloudpickle\nexcept ImportError:\n    import pickle as cloudpickle/' \
    -e 's/^from horovod\.runner\.util\.threads import in_thread$/in_thread = None  # horovodrun helper, unused here/' \
    "$t/utils/common.py" > "$work/common.py"
if grep -n "^\s*\(import\|from\) horovod" "$work/integration/data/$main" "$work/common.py"; then
  echo "FAIL: imports of horovod left after the rewrite (above)"; exit 1
fi
# A script, not a link: a venv's interpreter finds its venv from the path
# it is started by.
printf '#!/bin/sh\nexec "%s" "$@"\n' "$python" > "$work/bin/python" && chmod +x "$work/bin/python"
echo "from unittest.mock import *" > "$work/shim/mock.py"
for d in horovod horovod/runner horovod/runner/elastic horovod/runner/common horovod/runner/common/util; do
  : > "$work/shim/$d/__init__.py"; done
cp "$src/horovod/runner/elastic/constants.py" "$work/shim/horovod/runner/elastic/"
printf 'DISCOVER_HOSTS_FREQUENCY_SECS = 1.0\nELASTIC_TIMEOUT_SECS = 600\n' > "$work/shim/horovod/runner/elastic/driver.py"
printf 'def _get_min_start_hosts(settings):\n    return 1\n' > "$work/shim/horovod/runner/gloo_run.py"
printf 'def set_env_from_args(env, args):\n    pass\n' > "$work/shim/horovod/runner/common/util/config_parser.py"
cat > "$work/shim/horovod/runner/launch.py" <<PY
"""horovodrun's parse_args/_run_elastic for Horovod's elastic tests: runs khorovodrun."""
import os, subprocess, sys
from horovod.runner.elastic import driver
SHIM = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def parse_args():
    return list(sys.argv[1:])

def _run_elastic(args):
    cmd = ["$launcher", "--run-hosts-locally",
           "--discovery-interval-ms", str(max(10, int(driver.DISCOVER_HOSTS_FREQUENCY_SECS * 1000)))] + args
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p != SHIM)
    print("khorovodrun:", " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=float(os.environ.get("KHOROVOD_HVD_RUN_TIMEOUT", "240")))
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.output or b"").decode(errors="replace"), "timeout"
    print(out, flush=True)
    if rc != 0:
        own = [l for l in out.splitlines() if not l.startswith("[")]
        raise RuntimeError("khorovodrun exited with status %s: %s" % (rc, "\n".join(own[-20:])))
PY
export PYTHONPATH=$work/shim:$build/python${PYTHONPATH:+:$PYTHONPATH} PATH=$work/bin:$PATH
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
cd "$work/integration" || exit 1
timeout --kill-after=30 "${KHOROVOD_ACCEPTANCE_TIMEOUT:-1500}" \
  "$python" -m pytest -v -p no:cacheprovider -rfEs "$test_file" "$@"
