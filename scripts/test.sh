#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
# Stages, in this order: what users run first, the deep checks last.
#   deps                 Debian packages (scripts/install-deps.sh)
#   lint                 the gates: clang-format, ruff (check and format)
#                        and shellcheck (tests/lint/run.sh; --fix formats)
#   k8s-tools            every cluster tool, from one Go module graph
#                        (scripts/k8s-tools.sh; cached in ~/.cache/khorovod/k8s)
#   realnode             the user's story on a real node: images from a
#                        CPU-only build, kubelet + containerd + CNI + CoreDNS +
#                        kube-proxy, Helm, kubectl apply, kills (tests/realnode)
#   prometheus-operator  the chart's ServiceMonitor, PodMonitor and
#                        PrometheusRule through a real prometheus-operator
#   ecosystem            Kueue admission and coscheduling gangs (tests/ecosystem)
#   multinode            a 3-node cluster on this machine (scripts/real-cluster.sh):
#                        spread, a node crashed, a network cut, drain,
#                        preemption, scaling, GPU placement (tests/multinode)
#   pip-install          `pip install .` of khorovod.torch over PyPI's torch and
#                        Debian's, the seed script at 4 ranks
#   tensorflow           `pip install .` over PyPI's tensorflow-cpu (TF ops
#                        built), khorovod.tensorflow and .keras at 2-4 ranks
#                        (Keras 3 and tf-keras), elastic Keras, a peer killed
#                        in a TF allreduce, Keras step metrics, TF+torch
#   ci                   warnings-as-errors build with the GPU backends compiled
#                        (CUDA/NCCL wheels, scripts/install-cuda.sh) and every
#                        ctest test, the operator's against a real kube-apiserver
#   asan, tsan, fuzz     the deep checks: sanitizer builds over the runtime's
#                        memory and concurrency tests, and a libFuzzer run over
#                        the rendezvous request handlers (its clang build also
#                        checks the lock annotations: -Wthread-safety)
#   operator-1.37,       the operator's apiserver tests and the multinode
#   multinode-1.37       spread and node-crash scenarios again, on Kubernetes
#                        1.37 (every stage above runs 1.34); within the budget,
#                        like the deep checks
# Downloads (PyPI wheels, CUDA/NCCL wheels, Debian base images, clang) run in
# the background while the CPU-bound stages build.
#
# Budget: CI stops the suite at 90 minutes. A stage runs only if, at the time
# it took last on this machine (or its cold default below), it still ends
# within KHOROVOD_SUITE_BUDGET_MIN (default 85) minutes. Only the deep checks
# and the 1.37 stages are ever left out for time, and the summary names them.
#
# Options: --stage NAME[,NAME...] runs only those stages (the inner loop;
# k8s-tools and deps run when a chosen stage needs them).
# KHOROVOD_TEST_MULTINODE=quick: the multinode stage runs only its spread and
# GPU scenarios (about 1.5 minutes instead of 8), and the summary says so.
# Ends with a per-stage table (time, cold or warm caches, counts) and one line:
# "suite: N passed, M failed, K skipped".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
suite_start=$SECONDS
suite_budget_min=${KHOROVOD_SUITE_BUDGET_MIN:-85}
cache=${KHOROVOD_CACHE:-$HOME/.cache/khorovod}
source "$root/scripts/test/stages.sh"
logdir="$root/build/test-logs"; mkdir -p "$logdir"

only=""
while [ $# -gt 0 ]; do
  case $1 in
    --stage) only=",$2,"; shift ;;
    --stage=*) only=",${1#--stage=},"; ;;
    *) echo "usage: scripts/test.sh [--stage NAME[,NAME...]]" >&2; exit 2 ;;
  esac
  shift
done
wanted() { [ -z "$only" ] || [[ $only == *",$1,"* ]]; }
case ${KHOROVOD_TEST_MULTINODE:-all} in  # the multinode stage's scenarios, below
  all | 1 | quick) ;;
  *) echo "scripts/test.sh: KHOROVOD_TEST_MULTINODE is '$KHOROVOD_TEST_MULTINODE'; expected all (the default) or quick" >&2; exit 2 ;;
esac

# Cold figures on the project's 2-core machine (docs/benchmarks.md, "The
# suite's stages"), used to plan before this machine has measured its own.
STAGE_DEFAULT_SECS=([multinode]=600 [pip-install]=180 [tensorflow]=300 [ci]=1100
                    [asan]=600 [tsan]=420 [fuzz]=300 [operator-1.37]=1080 [multinode-1.37]=1500)

# ---- deps (and the background downloads)
stage_begin deps warm
bash scripts/install-deps.sh > "$logdir/deps.log" 2>&1; deps_rc=$?
cat "$logdir/deps.log"
grep -q "installing" "$logdir/deps.log" && stage_cache=cold
if [ $deps_rc -ne 0 ]; then stage_broken "install-deps failed"; stage_table; exit 1; fi
stage_end_counts 0 0

# I/O-bound preparation overlaps the CPU-bound builds: PyPI's torch wheels
# (pip-install and the PyTorch image), the CUDA/NCCL wheels (ci), the Debian
# base images (realnode) and clang (fuzz). Each is cached outside the clone;
# the stages that need them wait for this and then find them (or fail there
# with the reason, see build/test-logs/prefetch.log).
prefetch_cache=warm
[ -f "$(bash scripts/install-cuda.sh --print-prefix)/.complete" ] && compgen -G "$cache/wheels/torch-*/.complete" >/dev/null \
  && podman image exists debian:bookworm-slim 2>/dev/null || prefetch_cache=cold
( t0=$SECONDS; set -x; bash scripts/python-wheels.sh --download-only
  bash tests/python/tensorflow/run.sh --download-only; bash scripts/install-cuda.sh
  bash scripts/base-image.sh; bash scripts/install-fuzz-deps.sh; echo $((SECONDS - t0)) > "$logdir/prefetch.secs"
) > "$logdir/prefetch.log" 2>&1 &
prefetch_pid=$!
# wait_prefetch: waits for the downloads (once). Their row is added at the
# end (prefetch_row), with their own wall time, which overlapped the stages.
wait_prefetch() {
  [ -n "${prefetch_pid:-}" ] || return 0
  local waited=$SECONDS
  wait "$prefetch_pid" || echo "suite: the prefetch failed (build/test-logs/prefetch.log); the stages retry what they need"
  prefetch_pid=""
  [ $((SECONDS - waited)) -lt 5 ] || echo "suite: waited $((SECONDS - waited)) s for the downloads"
}
prefetch_row() {
  wait_prefetch
  stage_begin prefetch "$prefetch_cache" >/dev/null
  stage_t0=$((SECONDS - $(cat "$logdir/prefetch.secs" 2>/dev/null || echo 0)))
  stage_end_counts 0 0 >/dev/null
}

# ---- lint: the formatter and linter gates, before anything is built.
if wanted lint; then
  stage_begin lint warm
  compgen -G "$cache/venv-ruff-*/bin/ruff" >/dev/null || stage_cache=cold
  bash tests/lint/run.sh 2>&1 | tee "$logdir/lint.log"
  stage_end_script "$logdir/lint.log"
fi

# ---- k8s-tools: every stage below that runs a cluster needs them.
stage_begin k8s-tools warm
if bash scripts/k8s-tools.sh > "$logdir/k8s-tools.log" 2>&1; then
  grep -q "k8s-tools: building" "$logdir/k8s-tools.log" && stage_cache=cold
  stage_end_counts 0 0
else
  grep -q "k8s-tools: building" "$logdir/k8s-tools.log" && stage_cache=cold
  tail -30 "$logdir/k8s-tools.log"; stage_broken "building the cluster tools failed"; stage_table; exit 1
fi

# build NAME CMAKE_ARGS... [-- TARGETS...]: scripts/build.sh, its cold/warm
# verdict from ccache: a build that compiled more than a tenth of its objects
# anew ran cold.
build() {
  local m0 h0 m1 h1
  read -r m0 h0 < <(ccache_counts)
  echo "-- build ($1)"
  bash scripts/build.sh "$@" 2>&1 | tee "$logdir/build-$1.log" | grep -E "error|warning|FAILED" | head -40
  local rc=${PIPESTATUS[0]}
  read -r m1 h1 < <(ccache_counts)
  [ $(( (m1 - m0) * 10 )) -gt $(( (m1 - m0) + (h1 - h0) )) ] && stage_cache=cold
  return "$rc"
}
image_build_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKHOROVOD_WERROR=ON -DKHOROVOD_BUILD_TESTS=OFF
                  -DKHOROVOD_BUILD_BENCHMARKS=OFF -DKHOROVOD_BUILD_PYTHON=OFF -DKHOROVOD_WITH_NCCL=OFF
                  -- khorovodrun khorovod-rendezvous khorovod-example-trainer khorovod-operator)

# ---- realnode: the images copy this CPU-only build's binaries, stripped
# (scripts/images.sh prebuilt): no compiler runs inside an image build.
if wanted realnode; then
  stage_begin realnode warm
  podman image exists ghcr.io/khorovod/khorovod-pytorch:0.1.0 2>/dev/null || stage_cache=cold
  if build image "${image_build_args[@]}"; then
    wait_prefetch
    bash tests/realnode/run.sh build/image 2>&1 | tee "$logdir/realnode.log"
    stage_end_script "$logdir/realnode.log"
  else stage_broken "build (image) failed"; fi
fi

# ---- prometheus-operator: on the same binaries, a node of its own.
if wanted prometheus-operator; then
  stage_begin prometheus-operator warm
  podman images --format '{{.Repository}}' 2>/dev/null | grep -q '/prometheus-operator$' || stage_cache=cold
  if build image "${image_build_args[@]}"; then
    timeout 1800 bash tests/realnode/prometheus_operator.sh build/image 2>&1 | tee "$logdir/prometheus-operator.log"
    stage_end_script "$logdir/prometheus-operator.log"
  else stage_broken "build (image) failed"; fi
fi

# ---- ecosystem: Kueue and coscheduling, on the image build's operator.
if wanted ecosystem; then
  stage_begin ecosystem warm
  if build image "${image_build_args[@]}"; then
    timeout 2400 bash tests/ecosystem/run.sh build/image/bin/khorovod-operator 2>&1 | tee "$logdir/ecosystem.log"
    stage_end_script "$logdir/ecosystem.log"
  else stage_broken "build (image) failed"; fi
fi

# ---- multinode: the operator and runtime images of the same build on 3 nodes.
# Every scenario runs: spread placement, a node crashed, a node's network
# cut, drain, preemption and scaling, and GPU placement (8:10 in all on the
# 2-core machine, docs/benchmarks.md, "Multi-node stage").
# KHOROVOD_TEST_MULTINODE=quick runs only spread and the GPU scenarios (about
# 1:20, for a quick local run); the summary then names what it left out.
multinode_scenarios="spread node_kill net_cut evictions gpu_placement gpu_avoid"
if [ "${KHOROVOD_TEST_MULTINODE:-all}" = quick ]; then
  multinode_scenarios="spread gpu_placement gpu_avoid"
  wanted multinode && left_out+=("multinode: node crash, network cut, drain, preemption and scaling scenarios: KHOROVOD_TEST_MULTINODE=quick")
fi
# On a slow (e.g. fresh) machine, the full set could push the stages after
# it (pip-install, tensorflow, ci) past the budget and CI's limit: it then
# runs the quick set, and the summary names what that left out.
if [ "${KHOROVOD_TEST_MULTINODE:-all}" != quick ] && wanted multinode; then
  mn_state=warm; [ -d /var/lib/khorovod-cluster/n1/containerd ] || mn_state=cold
  ci_state=warm; [ -d build/ci ] || ci_state=cold
  after=$(( $(stage_estimate multinode "$mn_state") + $(stage_estimate pip-install warm) +
            $(stage_estimate tensorflow warm) + $(stage_estimate ci "$ci_state") ))
  if [ $((SECONDS - suite_start + after)) -gt $((suite_budget_min * 60)) ]; then
    multinode_scenarios="spread gpu_placement gpu_avoid"
    left_out+=("multinode: node crash, network cut, drain, preemption and scaling scenarios: at $(( (SECONDS - suite_start) / 60 )) min the full set would end the stages after it past the ${suite_budget_min}-min budget")
  fi
fi
if wanted multinode; then
  stage_begin multinode warm
  [ -d /var/lib/khorovod-cluster/n1/containerd ] || stage_cache=cold
  if build image "${image_build_args[@]}"; then
    wait_prefetch
    MULTINODE_SCENARIOS=$multinode_scenarios timeout 2700 bash tests/multinode/run.sh build/image 2>&1 |
      tee "$logdir/multinode.log"
    stage_end_script "$logdir/multinode.log"
  else stage_broken "build (image) failed"; fi
fi

# ---- pip-install: khorovod.torch as users install it.
if wanted pip-install; then
  wait_prefetch
  stage_begin pip-install warm
  compgen -G "$cache/venv/*/.complete" >/dev/null || stage_cache=cold
  bash tests/python/pip_install.sh 2>&1 | tee "$logdir/pip-install.log"
  stage_end_script "$logdir/pip-install.log"
fi

# ---- tensorflow: khorovod.tensorflow as users install it.
if wanted tensorflow; then
  wait_prefetch
  stage_begin tensorflow warm
  compgen -G "$cache/venv/tensorflow-cpu-*/.complete" >/dev/null || stage_cache=cold
  bash tests/python/tensorflow/run.sh 2>&1 | tee "$logdir/tensorflow.log"
  stage_end_script "$logdir/tensorflow.log"
  # Horovod's own scenarios need a Horovod checkout, which no registry serves:
  # say so in the summary rather than let the count hide them.
  grep -q "elastic TensorFlow scenarios skipped" "$logdir/tensorflow.log" &&
    left_out+=("tensorflow: Horovod's elastic TensorFlow scenarios (no Horovod checkout in KHOROVOD_HOROVOD_SOURCE)")
fi

# ---- ci: every test, with the GPU backends compiled (their tests skip here).
runtime_targets=(collectives_test device_collectives_test device_elastic_test runtime_unit_test backend_unit_test
                 gloo_backend_test host_backends_test hierarchical_allreduce_test
                 elastic_test khorovodrun launcher_test khorovodrun_ssh_worker
                 rendezvous_unit_test rendezvous_http_test khorovod-rendezvous operator_unit_test)
if wanted ci; then
  wait_prefetch
  stage_begin ci warm
  gpu_args=(-DKHOROVOD_WITH_NCCL=OFF)
  if cuda_prefix=$(bash scripts/install-cuda.sh | tail -1) && [ -d "$cuda_prefix" ]; then
    gpu_args=(-DKHOROVOD_WITH_NCCL=ON "-DKHOROVOD_CUDA_ROOT=$cuda_prefix")
  else
    broken+=("install-cuda: CUDA/NCCL wheels unavailable; GPU backends not compiled"); failed=$((failed + 1))
  fi
  if build ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKHOROVOD_WERROR=ON "${gpu_args[@]}"; then
    ctest --test-dir build/ci --output-on-failure --no-tests=error --timeout 600 2>&1 | tee "$logdir/ci.log"
    stage_end_ctest "$logdir/ci.log"
    # Horovod's own torch tests need a Horovod checkout too (as tensorflow's).
    grep -q "python_horovod_test_[a-z_0-9]* .*(Skipped)" "$logdir/ci.log" &&
      left_out+=("ci: Horovod's test_torch.py at 2 and 4 ranks and its elastic torch scenarios (no Horovod checkout in KHOROVOD_HOROVOD_SOURCE)")
  else stage_broken "build (ci) failed"; fi
fi

# ---- the deep checks, each only if it still fits the budget.
# budget_stage NAME STATE: whether NAME runs (chosen, and fits the budget at
# its STATE's estimate; else skipped and named in the summary).
budget_stage() {
  wanted "$1" || return 1
  stage_fits "$1" "$2" && return 0
  stage_skip "$1" "at $(( (SECONDS - suite_start) / 60 )) min it would end past the ${suite_budget_min}-min budget" \
                  "(about $(( $(stage_estimate "$1" "$2") / 60 )) min; KHOROVOD_SUITE_BUDGET_MIN)"
  return 1
}
# deep_stage NAME: a deep check runs warm once its build directory exists.
deep_stage() {
  local state=warm
  [ -d "build/$1" ] || state=cold
  budget_stage "$1" "$state"
}
if deep_stage asan; then
  stage_begin asan warm
  if build asan -DCMAKE_BUILD_TYPE=Debug -DKHOROVOD_SANITIZE=address -DKHOROVOD_WERROR=ON -DKHOROVOD_WITH_NCCL=OFF \
       -DKHOROVOD_BUILD_BENCHMARKS=OFF -- "${runtime_targets[@]}" khorovod_python; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir build/asan --output-on-failure --no-tests=error --timeout 900 \
        -L "runtime|launcher|rendezvous|operator-unit|python-asan" \
        -E "HierarchicalAllreduceTest.EveryDtypeAroundChunkBoundaries" 2>&1 | tee "$logdir/asan.log"
    stage_end_ctest "$logdir/asan.log"   # that data-coverage test takes >150 s at -O0; ci runs it
  else stage_broken "build (asan) failed"; fi
fi
if deep_stage tsan; then
  stage_begin tsan warm
  if build tsan -DCMAKE_BUILD_TYPE=Debug -DKHOROVOD_SANITIZE=thread -DKHOROVOD_WERROR=ON -DKHOROVOD_WITH_NCCL=OFF \
       -DKHOROVOD_BUILD_BENCHMARKS=OFF -- collectives_test device_collectives_test runtime_unit_test backend_unit_test \
       gloo_backend_test host_backends_test hierarchical_allreduce_test; then
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tests/tsan.supp" \
      ctest --test-dir build/tsan --output-on-failure --no-tests=error --timeout 900 -L "runtime-unit|runtime-integration" \
        -E "HierarchicalAllreduceTest.EveryDtypeAroundChunkBoundaries" 2>&1 | tee "$logdir/tsan.log"
    stage_end_ctest "$logdir/tsan.log"   # the elastic tests need cpp-httplib, which Debian does not build with TSan
  else stage_broken "build (tsan) failed"; fi
fi
if deep_stage fuzz; then
  wait_prefetch
  stage_begin fuzz warm
  if ! bash scripts/install-fuzz-deps.sh; then
    stage_broken "clang-14 / libclang-rt-14-dev could not be installed"
  # The clang build also proves the lock annotations (KHOROVOD_THREAD_SAFETY:
  # -Werror=thread-safety) over libkhorovod and the operator's libraries and
  # main; the operator's binary itself is not linked (FUZZ instruments util).
  elif build fuzz -DCMAKE_CXX_COMPILER=clang++-14 -DKHOROVOD_FUZZ=ON -DKHOROVOD_THREAD_SAFETY=ON \
         -DKHOROVOD_BUILD_BENCHMARKS=OFF -DKHOROVOD_WITH_NCCL=OFF -DKHOROVOD_BUILD_PYTHON=OFF -- rendezvous_http_fuzzer \
         khorovod khorovod_kube khorovod_operator_controller operator/CMakeFiles/khorovod-operator.dir/cmd/main.cc.o; then
    ctest --test-dir build/fuzz --output-on-failure --no-tests=error --timeout 300 -L fuzz 2>&1 | tee "$logdir/fuzz.log"
    stage_end_ctest "$logdir/fuzz.log"
  else stage_broken "build (fuzz) failed"; fi
fi

# ---- Kubernetes 1.37, the newest the Go module proxy serves (every stage
# above ran 1.34): the operator's apiserver tests on ci's build, then the
# multinode stage's spread scenario, with the 1.37 control plane and kubelets
# (scripts/k8s-1.37, KHOROVOD_K8S_VERSION). Like the deep checks, each runs
# only if it still fits the budget; the summary names one left out.
# A stage's cold/warm is whether the 1.37 binaries were built before it (the
# Go build is most of a cold one), so each stage builds them if they are not.
k8s137_state() {
  KHOROVOD_K8S_VERSION=1.37 bash scripts/k8s-tools.sh --check kube-apiserver kube-controller-manager \
    kube-scheduler kubelet kube-proxy 2>/dev/null && echo warm || echo cold
}
k8s137_tools() {  # false (the stage recorded as broken) if the build failed
  KHOROVOD_K8S_VERSION=1.37 bash scripts/k8s-tools.sh >> "$logdir/k8s-tools-1.37.log" 2>&1 && return 0
  tail -30 "$logdir/k8s-tools-1.37.log"; stage_broken "building the Kubernetes 1.37 tools failed"; return 1
}
state=$(k8s137_state)
if budget_stage operator-1.37 "$state"; then
  stage_begin operator-1.37 "$state"
  ci_args=(); [ -f build/ci/CMakeCache.txt ] || ci_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKHOROVOD_WERROR=ON -DKHOROVOD_WITH_NCCL=OFF)
  if ! k8s137_tools; then :
  elif build ci "${ci_args[@]}" -- operator_integration_test khorovod-operator; then
    stage_cache=$state   # ci's build is done by then in a whole run
    KHOROVOD_K8S_VERSION=1.37 ctest --test-dir build/ci --output-on-failure --no-tests=error --timeout 600 \
      -L "operator-integration|packaging" 2>&1 | tee "$logdir/operator-1.37.log"
    stage_end_ctest "$logdir/operator-1.37.log"
  else stage_broken "build (ci) failed"; fi
fi
state=$(k8s137_state)
if budget_stage multinode-1.37 "$state"; then
  stage_begin multinode-1.37 "$state"
  if ! k8s137_tools; then :
  elif build image "${image_build_args[@]}"; then
    stage_cache=$state   # the multinode stage built the images before
    KHOROVOD_K8S_VERSION=1.37 MULTINODE_SCENARIOS="spread node_kill" timeout 1800 bash tests/multinode/run.sh build/image 2>&1 |
      sed -u 's/^multinode: /multinode-1.37: /' | tee "$logdir/multinode-1.37.log"
    stage_end_script "$logdir/multinode-1.37.log"
  else stage_broken "build (image) failed"; fi
fi

prefetch_row
stage_table
