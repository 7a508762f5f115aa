#!/usr/bin/env bash
# shellcheck disable=SC2154  # root, work, here: set by the script that sources this one
# The Keras scenario of the real-node user story (sourced by user_story.sh,
# after scenarios.sh): deploy/examples/horovodjob-keras.yaml on the
# TensorFlow worker image (3 elastic workers running
# examples/python/keras_mnist_elastic.py, Horovod's elastic Keras pattern
# with only its import changed). Worker-1's process is killed on the node
# in the middle of an epoch; the survivors roll back to their last commit
# and re-form (as 2, or as 3 when the replacement is already up), the
# operator replaces the pod, the replacement joins, and the job Succeeds
# with all 3 final ranks holding one set of weights (one checksum).
# Prometheus holds the job's step and throughput series, as for a PyTorch job.
# Environment: REALNODE_KERAS_EPOCHS (default: the example's own 16).

# The example as written, with only its epoch count changed when asked.
keras_manifest() {
  local f="$root/deploy/examples/horovodjob-keras.yaml"
  if [ -n "${REALNODE_KERAS_EPOCHS:-}" ]; then
    sed -E "s/--epochs, \"[0-9]+\"/--epochs, \"$REALNODE_KERAS_EPOCHS\"/" "$f"
  else cat "$f"; fi
}

scenario_keras() {
  local ns=keras job=keras-mnist
  k create namespace "$ns" >/dev/null
  wait_for 30 k get serviceaccount default -n "$ns"
  keras_manifest | k apply -n "$ns" -f - >/dev/null && ok "kubectl apply -f deploy/examples/horovodjob-keras.yaml" \
    || { fail "kubectl apply of the Keras example"; return 1; }
  expect "$job: 3 TensorFlow workers and the rendezvous pod Running" 300 at_least_running "$job" "$ns" 4 \
    || { dump_job "$job" "$ns"; return 1; }
  keras_kill_mid_epoch "$ns" "$job" || { dump_job "$job" "$ns"; return 1; }
  expect_job_metrics "$job" "the Keras job"
  expect "$job: Succeeded" 600 phase_is "$job" "$ns" Succeeded || { dump_job "$job" "$ns"; return 1; }
  ranks_agree "$job" "$ns"
  local logs; logs=$(job_logs "$job" "$ns")
  matches -x "all 3 ranks agree on the parameters" <<<"$logs" && ok "$job: the replacement trained to the end (3 final ranks)" \
    || fail "$job: the final world was not 3 ranks: $(grep 'ranks agree' <<<"$logs" | tail -1)"
  local accuracy; accuracy=$(sed -nE 's/^final accuracy ([0-9.]+)/\1/p' <<<"$logs" | tail -1)
  if [ -n "$accuracy" ] && awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.8) }'; then ok "$job: held-out accuracy $accuracy"
  else fail "$job: held-out accuracy '${accuracy:-none}' (expected >= 0.8)"; fi
  k delete namespace "$ns" --wait=false >/dev/null
}

# keras_kill_mid_epoch NS JOB: SIGKILLs worker-1's trainer while rank 0 is
# inside an epoch (Keras prints "Epoch N/M" as one begins and "S/S - ..."
# as it ends; only rank 0 prints them) and follows the recovery.
keras_kill_mid_epoch() {
  local ns=$1 job=$2
  in_epoch() {
    job_logs "$job" "$ns" | grep -E '^(Epoch [0-9]+/[0-9]+$|[0-9]+/[0-9]+ - )' | tail -1 \
      | matches -E '^Epoch ([3-9]|[1-9][0-9])/'
  }
  expect "$job: training runs (rank 0 inside its third epoch or later)" 300 in_epoch || return 1
  local pid uid; uid=$(uid_of "$job-worker-1" "$ns"); pid=$(container_pid "$job-worker-1" "$ns")
  if [ -n "$pid" ] && kill -9 "$pid"; then ok "$job: killed worker-1's trainer process mid-epoch (host pid $pid)"
  else fail "$job: could not find worker-1's container process"; return 1; fi
  # The survivors roll back and re-form: as 2, or as 3 at once when the
  # replacement pod is up by then (the operator starts it within seconds).
  reformed() { job_logs "$job" "$ns" | matches -E "^re-formed: $1 ranks"; }
  expect "$job: the survivors re-formed" 120 reformed "[23]" || return 1
  local first; first=$(job_logs "$job" "$ns" | sed -nE 's/^re-formed: ([23] ranks, resuming at epoch [0-9]+ batch [0-9]+)$/\1/p' | head -1)
  if [[ $first =~ batch\ [1-9] ]]; then ok "$job: they resumed mid-epoch from their last commit ($first)"
  else fail "$job: the re-formation did not resume mid-epoch ('$first')"; fi
  failed_event() { events_of "$job" "$ns" | matches -E "WorkerFailed: worker $job-worker-1 failed \(exit code 137"; }
  expect "$job: WorkerFailed event for worker-1 with exit code 137" 60 failed_event
  expect "$job: the operator replaced worker-1 and it runs" 120 running_with_new_uid "$job-worker-1" "$ns" "$uid" || return 1
  expect "$job: the replacement joined (re-formed as 3 ranks)" 300 reformed 3
}
