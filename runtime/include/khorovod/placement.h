// Placement: where one worker process sits in a job's world.
//
//   rank, size              this process among all of them
//   local_rank, local_size  among the processes on its host
//   cross_rank, cross_size  its host among the hosts (hosts numbered in the
//                           order of their lowest rank)
//
// The one type for these six numbers: the configuration (khorovod/config.h),
// the running runtime (Runtime::topology), the rendezvous's assignment of a
// generation (server and client), and the launcher's worker environment all
// hold a Placement and copy it whole.
//
// Thread-safety: a value type.
#pragma once

namespace khorovod {

struct Placement {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;

  friend bool operator==(const Placement&, const Placement&) = default;
};

}  // namespace khorovod
