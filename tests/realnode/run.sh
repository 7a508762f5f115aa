#!/usr/bin/env bash
# The real-node stage of scripts/test.sh: builds the images from BUILD_DIR's
# binaries (scripts/images.sh prebuilt; cached by content), brings up the
# real node (scripts/real-node.sh), loads the images into its containerd,
# runs the user story (user_story.sh) and always takes the node down again.
# A machine that lacks what the node needs fails here with the reason.
# Prints the stage's timings and ends with "realnode: N passed, M failed".
# Usage: tests/realnode/run.sh BUILD_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${1:?usage: run.sh BUILD_DIR}
work="$root/build/test-logs/realnode"
rm -rf "$work"; mkdir -p "$work"
images=(ghcr.io/khorovod/khorovod-operator:0.1.0 ghcr.io/khorovod/khorovod-runtime:0.1.0
        ghcr.io/khorovod/khorovod-pytorch:0.1.0 ghcr.io/khorovod/khorovod-tensorflow:0.1.0)
broken() { echo "realnode: BROKEN: $*"; echo "realnode: 0 passed, 1 failed"; exit 1; }
t0=$SECONDS
bash "$root/scripts/images.sh" prebuilt "$build_dir" || broken "building the images failed"
t_images=$((SECONDS - t0))
# The GPU scenarios (gpu.sh) size themselves by it: the GPU example's two
# 4-GPU pods fill the node.
export KHOROVOD_NODE_GPUS=8
source "$root/tests/realnode/cluster_stage.sh"
cluster_stage realnode "$root/scripts/real-node.sh" "$root/tests/realnode/user_story.sh" "$work" "$t0" "$t_images" "${images[@]}"
