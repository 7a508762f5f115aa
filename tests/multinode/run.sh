#!/usr/bin/env bash
# The multinode stage of scripts/test.sh: the operator and runtime images
# from BUILD_DIR's binaries (scripts/images.sh prebuilt-core; cached by
# content), the 3-node cluster (scripts/real-cluster.sh) with them loaded,
# the scenarios (story.sh), and the cluster always taken down again.
# Prints the stage's timings and ends with "multinode: N passed, M failed".
# Usage: tests/multinode/run.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${1:?usage: run.sh BUILD_DIR}
work="$root/build/test-logs/multinode"
rm -rf "$work"; mkdir -p "$work"
images=(ghcr.io/khorovod/khorovod-operator:0.1.0 ghcr.io/khorovod/khorovod-runtime:0.1.0)
broken() { echo "multinode: BROKEN: $*"; echo "multinode: 0 passed, 1 failed"; exit 1; }
t0=$SECONDS
bash "$root/scripts/images.sh" prebuilt-core "$build_dir" || broken "building the images failed"
t_images=$((SECONDS - t0))
trap 'bash "$root/scripts/real-cluster.sh" down' EXIT
bash "$root/scripts/real-cluster.sh" down
bash "$root/scripts/real-cluster.sh" up || broken "the cluster did not come up (see the messages above)"
t_up=$((SECONDS - t0 - t_images))
bash "$root/scripts/real-cluster.sh" load "${images[@]}" || broken "loading the images into the nodes failed"
t_load=$((SECONDS - t0 - t_images - t_up))
timeout 2400 bash "$root/tests/multinode/story.sh" "$work" 2>&1 | tee "$work/story.log"
status=${PIPESTATUS[0]}
t_story=$((SECONDS - t0 - t_images - t_up - t_load))
echo "multinode: timings: images ${t_images}s, cluster up ${t_up}s, image load ${t_load}s, scenarios ${t_story}s, total $((SECONDS - t0))s"
grep -q '^multinode: [0-9]* passed' "$work/story.log" || { echo "multinode: 0 passed, 1 failed (the story ended early, status $status)"; exit 1; }
exit "$status"
