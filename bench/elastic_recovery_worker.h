// elastic_recovery_worker.h - the worker half of khorovod-bench-elastic.
//
// Runs under `khorovodrun -np 4 --min-np 3 --max-np 4`. The job loops over
// trials; each trial is driven by elastic State that every rank shares, so a
// trial advances exactly once whatever rank dies or joins:
//
//   1. At full size with `armed == 0`, every rank commits `armed = 1` (the
//      arm step).
//   2. The next step at full size is the kill step: the victim (rank
//      trial % size) writes kill.<trial> (its CLOCK_MONOTONIC time) and
//      SIGKILLs itself; the others' allreduce fails, run() rolls them back
//      to `armed == 1`, resets and syncs.
//   3. In the new generation every rank has been through a reset (survivors)
//      or has just joined (replacements), which is how they know the kill
//      already happened: the first allreduce is timed, survivors write
//      recover.<trial>.<worker>, and `armed = 0, ++trial` is committed.
//   4. The survivors keep stepping until khorovodrun's replacement joins at
//      a commit; the replacement writes join.<worker> (from its process
//      start to its first allreduce). Back to 1 until `trials` are done.
//
// Every file holds one line of steady_clock (CLOCK_MONOTONIC) nanosecond
// timestamps, comparable across processes on one machine:
//   kill.<t>:            kill
//   recover.<t>.<name>:  failed_collective reset_done first_allreduce
//   join.<name>:         trial process_start init_done first_allreduce
//
// Single-threaded (the training thread); the runtime runs its own threads.
#pragma once

#include <string>

namespace khorovod::bench {

struct RecoveryWorkerOptions {
  std::string dir;         // where the timestamp files go (must exist)
  int trials = 20;         // kills to perform
  int full_size = 4;       // the world size at which a kill is armed (max-np)
  int step_ms = 5;         // simulated compute per step, before its allreduce
  int max_steps = 200000;  // bound on the whole job's steps
  bool trace = false;      // one stderr line per step and per failure
};

// Returns the process exit code.
int run_recovery_worker(const RecoveryWorkerOptions& options);

}  // namespace khorovod::bench
