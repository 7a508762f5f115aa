#!/usr/bin/env bash
# The part of a cluster stage's runner that the realnode and multinode stages
# share (sourced by tests/realnode/run.sh and tests/multinode/run.sh): a
# fresh cluster (its script's down, then up), the images loaded, the story
# run with a bound, the cluster always taken down, the timings printed, and
# the stage's summary line guaranteed ("NAME: N passed, M failed").
# cluster_stage NAME CLUSTER_SCRIPT STORY WORK T0 T_IMAGES IMAGE...: exits
# with the story's status. T0 is the stage's start (SECONDS), T_IMAGES the
# seconds its image build took.
cluster_stage() {
  local name=$1 script=$2 story=$3 work=$4 t0=$5 t_images=$6; shift 6
  # shellcheck disable=SC2064  # the script's path is expanded now, on purpose
  trap "bash '$script' down" EXIT
  # A fresh cluster every time: one left from an earlier run holds its state.
  bash "$script" down
  bash "$script" up || { echo "$name: BROKEN: the cluster did not come up (see the messages above)"; echo "$name: 0 passed, 1 failed"; exit 1; }
  local t_up=$((SECONDS - t0 - t_images))
  bash "$script" load "$@" || { echo "$name: BROKEN: loading the images failed"; echo "$name: 0 passed, 1 failed"; exit 1; }
  local t_load=$((SECONDS - t0 - t_images - t_up))
  timeout 2400 bash "$story" "$work" 2>&1 | tee "$work/story.log"
  local status=${PIPESTATUS[0]}
  local t_story=$((SECONDS - t0 - t_images - t_up - t_load))
  echo "$name: timings: images ${t_images}s, cluster up ${t_up}s, image load ${t_load}s, story ${t_story}s, total $((SECONDS - t0))s"
  grep -q "^$name: [0-9]* passed" "$work/story.log" || { echo "$name: 0 passed, 1 failed (the story ended early, status $status)"; exit 1; }
  exit "$status"
}
