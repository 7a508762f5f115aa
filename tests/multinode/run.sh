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
source "$root/tests/realnode/cluster_stage.sh"
cluster_stage multinode "$root/scripts/real-cluster.sh" "$root/tests/multinode/story.sh" "$work" "$t0" "$t_images" "${images[@]}"
