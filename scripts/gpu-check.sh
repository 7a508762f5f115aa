#!/usr/bin/env bash
# The GPU checks that CI cannot run (it has no GPU), prepared for a bare
# machine with one GPU (docs/gpu.md, "Running the GPU checks"): at most two
# commands of 10 minutes each, everything they need carried in one folder.
#
#   scripts/gpu-check.sh pack DIR [--nccl-git GITDIR] [--nccl-tag TAG]
#       here: packs the GPU build's stripped binaries (build/gpu) and the
#       shared libraries a bare CUDA machine lacks into DIR/khorovod-gpu.tar.xz,
#       and NCCL's source at TAG (default v2.30.7-1, from a clone of
#       NVIDIA/nccl) into DIR/nccl-src.tar.xz for part 2
#   scripts/gpu-check.sh run DIR --part 1|2 [--dry-run]
#       on the GPU machine, from the clone's root:
#       part 1, with the NCCL of the machine's torch (2.28.9 there: shrink
#         and revoke, no grow): the GPU unit tests; every NCCL test at 1, 2
#         and 4 ranks (several ranks on one GPU: KHOROVOD_GPU_SHARE=1); the
#         runtime's device path; the kill schedules on NCCL; 100
#         re-formations with device memory back at its baseline (2 ranks,
#         then 4 if the budget allows);
#       part 2: NCCL from the carried source for sm_90 (16 cores, in the
#         background) while khorovod.torch runs on CUDA tensors (its
#         extension compiled there) at 1, 2 and 4 ranks, the seed-style script
#         at 2 and 4, the example trainer at 2 and 4; then with that NCCL
#         (grow, multi-rank-GPU) the multi-rank tests and the joiner
#         schedules again; last, on a quiet machine, the fusion benchmark and
#         the step against torch DDP at 2 and 4 ranks.
#       --dry-run runs the same orchestration here on the CPU: GPU tests
#       must report their skip, the rest runs on the CPU/Gloo path.
# Each check has a time estimate; one that would end past the part's budget
# (BUDGET_S, default 560 s) is not started and is reported as such. Output:
# one line per check, then "gpu-check: part N: P passed, F failed, S skipped
# (budget B)"; logs and figures go to $OUT (else ./gpu-check-out). Exit 1
# when a check failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
verb=${1:-}; dir=${2:-}
if [ -z "$verb" ] || [ -z "$dir" ]; then sed -n 2,31p "$0"; exit 2; fi
shift 2
part=""; dry=0; nccl_git=""; nccl_tag=v2.30.7-1
while [ $# -gt 0 ]; do
  case $1 in
    --part) part=${2:-}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --nccl-git) nccl_git=${2:-}; shift 2 ;;
    --nccl-tag) nccl_tag=${2:-}; shift 2 ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
bins=(nccl_gpu_test runtime_gpu_test nccl_elastic_gpu_test schedule_rehearsal_test nccl_library_test backend_unit_test
      khorovod-bench-gpu-fusion khorovodrun khorovod-rendezvous khorovod-example-trainer)

pack() {
  local build=${KH_GPU_BUILD:-$root/build/gpu} stage
  stage=$(mktemp -d)
  mkdir -p "$dir" "$stage/bin" "$stage/lib/fixtures"
  for b in "${bins[@]}"; do cp "$build/bin/$b" "$stage/bin/" || exit 1; done
  cp "$build/lib/libkhorovod.so" "$stage/lib/"
  cp "$build"/tests/runtime/backend/nccl/fixtures/*.so "$stage/lib/fixtures/"
  strip "$stage"/bin/* "$stage/lib/libkhorovod.so"
  # Everything they link except glibc and the C++ runtime: Gloo and the
  # other Debian libraries, and the CUDA 12 runtime (the GPU machine's
  # toolkit is CUDA 13). libnccl is never linked (dlopen).
  ldd "$stage"/bin/* "$stage/lib/libkhorovod.so" | awk '/=> \//{print $1, $3}' | sort -u |
    while read -r name path; do
      case $name in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libstdc++*|libgcc_s*|libkhorovod*|ld-linux*) ;;
        *) cp -L "$path" "$stage/lib/" ;;
      esac
    done
  tar -C "$stage" -cf - bin lib | xz -T0 -6 > "$dir/khorovod-gpu.tar.xz" || exit 1
  rm -rf "$stage"
  if [ -n "$nccl_git" ]; then
    git --git-dir="$nccl_git" archive --prefix=nccl/ "$nccl_tag" | xz -T0 -6 > "$dir/nccl-src.tar.xz" || exit 1
    echo "$nccl_tag" > "$dir/nccl-tag"
  fi
  du -b "$dir"/* | awk '{printf "%s %.1f MiB\n", $2, $1 / 1048576}'
}

# --- run: bookkeeping ----------------------------------------------------------
out=${OUT:-$PWD/gpu-check-out}
py=${PYTHON:-python3}  # the interpreter with torch (the machine's python3 on the GPU machine)
budget=${BUDGET_S:-560}
start=$SECONDS
pass=0; fail=0; skip=0
log=""
say() { echo "$*" | tee -a "$log"; }

# check NAME ESTIMATE_S TIMEOUT_S CMD...: runs CMD unless it would end past
# the budget; a GPU test that reports a skip fails outside --dry-run.
check() {
  local name=$1 est=$2 limit=$3; shift 3
  if [ $((SECONDS - start + est)) -gt "$budget" ]; then
    say "--- SKIP $name (not started: ~${est} s would pass the ${budget}-s budget)"; skip=$((skip + 1)); return
  fi
  local t0=$SECONDS rc tmp
  tmp=$(mktemp)
  timeout --kill-after=10 "$limit" "$@" > "$tmp" 2>&1
  rc=$?
  cat "$tmp" >> "$log"
  local skipped=0
  grep -q '\[  SKIPPED \]' "$tmp" && skipped=1
  if [ $rc -eq 0 ] && [ $skipped -eq 1 ] && [ $dry -eq 0 ]; then rc=99; fi
  if [ $rc -eq 0 ] && [ $skipped -eq 1 ]; then
    say "--- skip $name ($((SECONDS - t0)) s: $(grep -m1 -o 'Skipped.*\|SKIPPED.*' "$tmp" | head -1))"
    skip=$((skip + 1))
  elif [ $rc -eq 0 ]; then
    say "--- ok   $name ($((SECONDS - t0)) s)"; pass=$((pass + 1))
  else
    say "--- FAIL $name (rc=$rc$([ $rc -eq 124 ] && echo ', timed out'), $((SECONDS - t0)) s)"
    tail -n 15 "$tmp" | sed 's/^/      /'
    fail=$((fail + 1))
  fi
  grep -h '^reform-ms: \|^reform-memory: \|khorovod: nccl: \|^step-ms: \|^overlap: \|^\[0\]<stdout>:step-ms\|^\[0\]<stdout>:overlap' "$tmp" |
    sed 's/^\[0\]<stdout>://' >> "$out/figures.txt"
  rm -f "$tmp"
}

gtests() {  # BINARY FILTER ESTIMATE TIMEOUT: one process per test (CUDA must not fork)
  local bin=$1 filter=$2 est=$3 limit=$4 t
  for t in $("$bin" --gtest_list_tests --gtest_filter="$filter" | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    check "$t" "$est" "$limit" "$bin" --gtest_filter="$t"
  done
}

unpack() {
  pkg=$(mktemp -d)
  xz -dc "$dir/khorovod-gpu.tar.xz" | tar -C "$pkg" -xf - || { echo "gpu-check: cannot unpack $dir" >&2; exit 1; }
  export LD_LIBRARY_PATH=$pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export KHOROVOD_TEST_RENDEZVOUS_BINARY=$pkg/bin/khorovod-rendezvous
  export KHOROVOD_TEST_NCCL_FIXTURES=$pkg/lib/fixtures
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN} PYTHONUNBUFFERED=1
}

machine_facts() {
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1
  echo "nproc $(nproc)"
}

torch_nccl() {  # the libnccl.so.2 of the machine's torch wheels, if any
  "$py" -c 'import glob, sys
for p in sys.path:
    g = glob.glob(p + "/nvidia/nccl/lib/libnccl.so.2")
    if g: print(g[0]); break' 2>/dev/null
}

part1() {
  local b=$pkg/bin
  check nccl-loader-and-plan 10 60 "$b/nccl_library_test"
  gtests "$b/backend_unit_test" 'GpuBuild.*' 10 60
  gtests "$b/nccl_gpu_test" '-NcclGpu.AbortAndReinitDoesNotLeak:*HundredReformations*' 20 120
  gtests "$b/runtime_gpu_test" '*' 30 150
  gtests "$b/nccl_elastic_gpu_test" '*' 45 200
  gtests "$b/nccl_gpu_test" '*HundredReformations*ranks2' 150 280
  gtests "$b/nccl_gpu_test" '*HundredReformations*ranks4' 200 280  # when the budget still allows
  # Here, the schedules run over emulated device memory instead.
  [ $dry -eq 1 ] && gtests "$b/schedule_rehearsal_test" '*' 30 200
}

# khorovod.torch for the machine's Python: compiled there over the packed
# libkhorovod (the extension includes no torch header).
python_package() {
  local ext inc
  pyk=$(mktemp -d)
  mkdir -p "$pyk/khorovod" && cp -r "$root/python/khorovod/." "$pyk/khorovod/"
  printf 'NCCL_BUILT = 23203\nCUDA_BUILT = True\n' > "$pyk/khorovod/_build_info.py"
  ext=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  inc=$("$py" -m pybind11 --includes 2>/dev/null || echo "$("$py"-config --includes) -I/usr/include")
  # shellcheck disable=SC2086  # $inc is a list of -I flags
  check build-extension 60 300 g++ -O2 -shared -fPIC -std=c++20 $inc \
    -I"$root/runtime/include" -I"$root/runtime/src" -I"$root/runtime/metrics/include" "$root"/python/src/*.cc \
    -L"$pkg/lib" -lkhorovod -Wl,-rpath,"$pkg/lib" -o "$pyk/khorovod/_khorovod$ext"
  KHOROVOD_TEST_PYTHON=$(command -v "$py")
  export KHOROVODRUN=$pkg/bin/khorovodrun KHOROVOD_TEST_PYTHON PYTHONPATH=$pyk
}

python_checks() {
  check nccl-runtime-info 10 60 "$py" -c 'import khorovod; i = khorovod.nccl_runtime_info(); print(i); assert i["version_code"] >= 22700'
  check pytest-cuda 150 400 "$py" -m pytest -q -p no:cacheprovider "$root/tests/python/test_collectives.py" \
    "$root/tests/python/test_seed_script.py" -k cuda
  local n
  for n in 2 4; do
    check "example-trainer-np$n" 40 120 "$pkg/bin/khorovodrun" -np "$n" --min-np 2 --max-np "$n" \
      "$pkg/bin/khorovod-example-trainer" --steps 200 --fail-at-step 100
  done
}

dry_python_checks() {  # the CPU rehearsal of python_checks
  local n
  for n in 2 4; do
    check "seed-script-cpu-np$n" 60 150 "$pkg/bin/khorovodrun" -np "$n" "$py" "$out/seed_cpu.py"
    check "example-trainer-np$n" 60 150 "$pkg/bin/khorovodrun" -np "$n" --min-np 2 --max-np "$n" \
      "$pkg/bin/khorovod-example-trainer" --steps 200 --fail-at-step 100
  done
}

build_nccl() {  # background: NCCL for sm_90 from the carried source
  [ -f "$dir/nccl-src.tar.xz" ] || { echo "no NCCL source packed"; return 1; }
  local src; src=$(mktemp -d)
  xz -dc "$dir/nccl-src.tar.xz" | tar -C "$src" -xf - || return 1
  local cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
  make -C "$src/nccl" -j"$(nproc)" src.build CUDA_HOME="$cuda_home" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$out/nccl-build.log" 2>&1 || return 1
  echo "$src/nccl/build/lib/libnccl.so.2" > "$nccl_built"
}

part2() {
  local b=$pkg/bin nccl_pid=""
  nccl_built=$(mktemp)
  if [ $dry -eq 0 ]; then
    build_nccl & nccl_pid=$!
    python_package
    python_checks
  else
    # The stand-in for the source build: the 2.32 fixture library (it has
    # grow), through the same wait and switch.
    { sleep 1; echo "$pkg/lib/fixtures/libnccl_fixture_2_32.so" > "$nccl_built"; } & nccl_pid=$!
    python_package
    dry_python_checks
  fi
  if [ -n "$nccl_pid" ]; then
    local waited=0
    while kill -0 "$nccl_pid" 2>/dev/null && [ $((SECONDS - start)) -lt $((budget - 200)) ]; do sleep 5; waited=$((waited + 5)); done
    if kill -0 "$nccl_pid" 2>/dev/null; then
      kill "$nccl_pid"; say "--- SKIP nccl-source-build (still building; see nccl-build.log)"; skip=$((skip + 1))
    elif wait "$nccl_pid" && [ -s "$nccl_built" ]; then
      local what; what=$(cat "$dir/nccl-tag" 2>/dev/null)
      [ $dry -eq 1 ] && what="dry run: the 2.32 fixture stands in"
      say "--- ok   nccl-source-build ($what, waited ${waited} s after the python checks)"
      pass=$((pass + 1))
      local torch_lib=${KHOROVOD_NCCL_LIBRARY:-}
      export KHOROVOD_NCCL_LIBRARY
      KHOROVOD_NCCL_LIBRARY=$(cat "$nccl_built")
      part2_new_nccl
      KHOROVOD_NCCL_LIBRARY=$torch_lib  # back to torch's for the benchmarks
    else
      say "--- FAIL nccl-source-build (see nccl-build.log)"; fail=$((fail + 1))
    fi
  fi
  if [ $dry -eq 0 ]; then
    check gpu-fusion-bench 60 150 "$b/khorovod-bench-gpu-fusion" --reps 11 --iters 20
  else  # no GPU here: the benchmark must say so and fail
    # shellcheck disable=SC2016  # expanded by the inner bash
    check gpu-fusion-bench-refuses 5 30 bash -c 'o=$("$0" --reps 1 --iters 1 2>&1); rc=$?; echo "$o"
      [ $rc -ne 0 ] && grep -q "no usable GPU" <<<"$o"' "$b/khorovod-bench-gpu-fusion"
  fi
  local n model=resnet50
  [ $dry -eq 1 ] && model=mlp
  export KHOROVOD_GPU_SHARE=1  # the ranks share the machine's GPU
  for n in 2 4; do
    check "step-vs-ddp-np$n" 90 200 "$b/khorovodrun" -np "$n" "$py" "$root/bench/gpu_step_compare.py" \
      --model "$model" --json "$out/step-np$n.json" --port $((29533 + n))
  done
}

part2_new_nccl() {  # the multi-rank tests and the joiner schedules on NCCL >= 2.29
  local b=$pkg/bin
  check nccl-runtime-info-built 10 60 "$py" -c 'import khorovod; i = khorovod.nccl_runtime_info(); print(i); assert i["grow"]'
  gtests "$b/nccl_gpu_test" '*NcclRanks.EveryCollective*:*SharedGpu*' 20 120
  gtests "$b/nccl_elastic_gpu_test" '*Joiner*:*KillMidAllreduce4' 45 200
}

run() {
  [ "$part" = 1 ] || [ "$part" = 2 ] || { echo "gpu-check: run needs --part 1 or --part 2" >&2; exit 2; }
  mkdir -p "$out"
  log=$out/part$part.log
  : > "$log"; : > "$out/figures.txt"
  machine_facts 2>&1 | tee -a "$log"
  unpack
  if [ $dry -eq 0 ]; then
    KHOROVOD_NCCL_LIBRARY=$(torch_nccl)
    [ -n "$KHOROVOD_NCCL_LIBRARY" ] && export KHOROVOD_NCCL_LIBRARY
  else
    # The CPU rehearsal of the seed-style script (the GPU run uses pytest's).
    sed 's/^import horovod\.torch as hvd$/import khorovod.torch as hvd/' \
      "$root/tests/python/workers/seed_five_steps.py" > "$out/seed_cpu.py"
  fi
  "part$part"
  say "gpu-check: part $part: $pass passed, $fail failed, $skip skipped ($((SECONDS - start)) s of ${budget})"
  [ $fail -eq 0 ]
}

case $verb in
  pack) pack ;;
  run) run ;;
  *) echo "gpu-check: unknown verb '$verb' (pack or run)" >&2; exit 2 ;;
esac
