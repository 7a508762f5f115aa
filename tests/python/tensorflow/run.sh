#!/usr/bin/env bash
# The tensorflow suite stage: khorovod.tensorflow as users install it.
#   1. PyPI's tensorflow-cpu (python/tensorflow-pin.txt) with its
#      dependencies and the test tools, and tf-keras (python/tf-keras-pin.txt,
#      without its dependencies), downloaded once into
#      ~/.cache/khorovod/wheels/tensorflow-cpu-<version>/ (.complete holds
#      the pins' checksum; a changed pin tops the cache up);
#   2. a venv from /usr/bin/python3 with them installed, cached in
#      ~/.cache/khorovod/venv/tensorflow-cpu-<version>-py3.11/ (tf-keras is
#      used only by the cases that set TF_USE_LEGACY_KERAS=1);
#   3. `pip install .` of khorovod into it (khorovod uninstalled first, so
#      the install under test is fresh; build/wheel-tf and ccache keep it
#      incremental), which builds the TensorFlow ops because TensorFlow
#      imports there;
#   4. tests/python/tensorflow/test_tensorflow.py and test_keras_metrics.py
#      through the venv's own khorovodrun and python, with no PYTHONPATH
#      (the TensorFlow+torch case adds the pip-install stage's torch venv);
#   5. with KHOROVOD_HOROVOD_SOURCE (a Horovod checkout), Horovod's elastic
#      TensorFlow scenarios (see below).
# Prints "tensorflow: N passed, M failed" last; exit 0 iff all passed.
# --download-only stops after 1 and prints the wheel directory; --venv-only
# stops after 2 and prints the venv (scripts/python-wheels.sh --tensorflow
# builds the TensorFlow worker image's khorovod wheel with it).
# Usage: tests/python/tensorflow/run.sh [--download-only|--venv-only] [-- pytest args]
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
download_only=0 venv_only=0
[ "${1:-}" = "--download-only" ] && { download_only=1; shift; }
[ "${1:-}" = "--venv-only" ] && { venv_only=1; shift; }
[ "${1:-}" = "--" ] && shift
pin=$root/python/tensorflow-pin.txt
tf_version=$(sed -n 's/^tensorflow-cpu==//p' "$pin")
wheels=$cache/wheels/tensorflow-cpu-$tf_version
venv=$cache/venv/tensorflow-cpu-$tf_version-py3.11
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=1
command -v ccache >/dev/null && export CMAKE_CXX_COMPILER_LAUNCHER=ccache
unset PYTHONPATH KHOROVODRUN

fail() { echo "FAIL: $*"; echo "tensorflow: 0 passed, 1 failed"; exit 1; }

# The caches are marked complete with the pins' checksum, so a changed pin
# (a new test tool) tops them up instead of being missed.
keras2_pin=$root/python/tf-keras-pin.txt
pins_sum=$(cat "$pin" "$keras2_pin" | sha256sum | cut -c1-16)
# Every pinned name==version has its wheel in the cache (a cache marked
# complete by an interrupted or older run once lacked psutil, and the venv
# install then failed with "No matching distribution").
pinned_wheels_present() {
  local name version
  while IFS='=' read -r name _ version; do
    name=$(tr -- '-.' '__' <<<"$name")
    find "$wheels" -maxdepth 1 -iname "${name}-${version}-*" 2>/dev/null | grep -q . || return 1
  done < <(grep -hE '^[A-Za-z0-9_.-]+==' "$pin" "$keras2_pin")
}
if [ "$(cat "$wheels/.complete" 2>/dev/null)" != "$pins_sum" ] || ! pinned_wheels_present; then
  echo "tensorflow: fetching tensorflow-cpu $tf_version and tf-keras into $wheels"
  mkdir -p "$wheels"
  timeout 1200 /usr/bin/python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --python-version 3.11 --implementation cp --abi cp311 -d "$wheels" -r "$pin" \
    || fail "downloading the pinned TensorFlow wheels"
  timeout 600 /usr/bin/python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
    -d "$wheels" -r "$keras2_pin" || fail "downloading the pinned tf-keras wheel"
  echo "$pins_sum" > "$wheels/.complete"
fi
[ "$download_only" = 1 ] && { echo "$wheels"; exit 0; }
bash "$root/scripts/python-wheels.sh" --download-only >/dev/null || fail "pip's build requirements unavailable"

if [ "$(cat "$venv/.complete" 2>/dev/null)" != "$pins_sum" ]; then
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv" || fail "creating $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$wheels" \
    -r "$pin" || fail "installing TensorFlow into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$wheels" \
    --no-deps -r "$keras2_pin" || fail "installing tf-keras into $venv"
  echo "$pins_sum" > "$venv/.complete"
fi
[ "$venv_only" = 1 ] && { echo "$venv"; exit 0; }

"$venv/bin/python" -m pip uninstall --quiet --yes khorovod >/dev/null 2>&1
(cd "$root" && timeout 1500 nice -n 5 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
   --no-index --find-links "$cache/wheels/pybuild" "--config-settings=build-dir=build/wheel-tf/{wheel_tag}" \
   --config-settings=cmake.define.KHOROVOD_WITH_TENSORFLOW=ON .) || fail "pip install . into $venv"
TF_CPP_MIN_LOG_LEVEL=2 "$venv/bin/python" -c '
import tensorflow as tf, khorovod.tensorflow.keras as hvd, khorovod._build_info as b
print("tensorflow", tf.__version__, "keras", tf.keras.__version__, "ops built against", b.TENSORFLOW_VERSION)' \
  || fail "khorovod.tensorflow does not import from $venv"

# Torch for the one-process TensorFlow+torch case: the pip-install stage's
# PyPI torch venv, appended to that case's sys.path (skipped without it).
torch_site=$(compgen -G "$cache/venv/torch-*-py3.11/lib/python3.11/site-packages" | head -1)
[ -f "${torch_site%/lib/*}/.complete" ] || torch_site=
cd "$root/tests/python/tensorflow" || exit 1
env PATH="$venv/bin:/usr/bin:/bin" KHOROVODRUN="$venv/bin/khorovodrun" KHOROVOD_TEST_PYTHON="$venv/bin/python" \
  KHOROVOD_TEST_TORCH_SITE="$torch_site" OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1 \
  timeout 1500 "$venv/bin/python" -m pytest -q -p no:cacheprovider -rfEs test_tensorflow.py test_keras_metrics.py \
  "$@" | tee /tmp/khorovod-tf-stage.$$
# Counts of the last pytest summary line in file $1 ("P F"; F=1 when there is none).
pytest_counts() {
  local summary p f
  summary=$(grep -E "^[0-9]+ (passed|failed)|^(=+ )?[0-9]+ (passed|failed)" "$1" | tail -1)
  p=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || echo 0)
  f=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{n += $1} END {print n + 0}')
  [ -n "$summary" ] || f=1
  echo "${p:-0} ${f:-0}"
}
read -r p f < <(pytest_counts /tmp/khorovod-tf-stage.$$)

# 5. Horovod's elastic TensorFlow scenarios (test/integration/
#    test_elastic_tensorflow2.py, test_elastic_tensorflow_keras.py, their
#    data/ scripts) through the venv's khorovodrun, when a Horovod checkout
#    is given (KHOROVOD_HOROVOD_SOURCE; nothing of Horovod is vendored or
#    downloaded). The scripts use Keras 2 (optimizer.lr): tf-keras. The
#    Keras one opens a TF1 session, renamed to tf.compat.v1 (the runner's
#    KHOROVOD_HVD_TF1_COMPAT); each file is bounded to 900 s.
if [ -n "${KHOROVOD_HOROVOD_SOURCE:-}" ]; then
  for framework in tensorflow2 tensorflow_keras; do
    env PATH="$venv/bin:/usr/bin:/bin" KHOROVODRUN="$venv/bin/khorovodrun" KHOROVOD_TEST_PYTHON="$venv/bin/python" \
      TF_USE_LEGACY_KERAS=1 KHOROVOD_HVD_TF1_COMPAT=1 TF_CPP_MIN_LOG_LEVEL=2 KHOROVOD_ACCEPTANCE_TIMEOUT=900 \
      bash "$root/tests/python/horovod_acceptance/run_test_elastic.sh" "$KHOROVOD_HOROVOD_SOURCE" "$framework" \
      "$venv" 2>&1 | tee /tmp/khorovod-tf-stage.$$ | grep -E "^(test_elastic|FAILED|ERROR|SKIP|=+ .*(passed|failed))"
    read -r ep ef < <(pytest_counts /tmp/khorovod-tf-stage.$$)
    echo "tensorflow: Horovod's test_elastic_$framework.py: $ep passed, $ef failed"
    p=$((p + ep)); f=$((f + ef))
  done
else
  echo "tensorflow: Horovod's elastic TensorFlow scenarios skipped (set KHOROVOD_HOROVOD_SOURCE to a Horovod checkout)"
fi
rm -f /tmp/khorovod-tf-stage.$$
echo "tensorflow: ${p:-0} passed, ${f:-0} failed"
[ "${f:-0}" -eq 0 ] && [ "${p:-0}" -gt 0 ]
