// PlanReform: how a new session's NCCL communicator is formed from what
// the ranks bring from the last one, decided alike on every rank.
//
// Every rank of the new session contributes one ReformMember (gathered over
// the session's Gloo context, so all ranks plan from the same list, indexed
// by new rank). The paths, in NCCL's own fault-tolerance API where the
// loaded NCCL of every rank has it (NcclFeatures):
//   kReuse       the same ranks in the same order, none broken: keep it;
//   kShrink      ranks were lost, none joined: ncclCommShrink without them
//                (2.27+); a broken communicator must have been revoked
//                (ncclCommRevoke) first, since one stuck in a kernel can
//                only be aborted otherwise (NcclComm::Fail);
//   kGrow        ranks joined, none lost: ncclCommGrow (2.29+), the
//                newcomers after the old ranks;
//   kShrinkGrow  both: shrink, then grow;
//   kInit        anything else: abort what is left and form a new
//                communicator from a new unique id (ncclCommInitRankConfig).
// NCCL keeps the survivors' relative order when it shrinks and appends
// newcomers when it grows, so a fault-tolerance path is taken only when the
// new session's ranks are exactly that order: the survivors first, in their
// old order, then the newcomers. Otherwise (the rendezvous ordered them
// differently, mixed histories, an unrevoked broken communicator) kInit,
// with the reason.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/nccl/nccl_library.h"

namespace khorovod {

// What one rank brings. POD: it travels over Gloo as bytes.
struct ReformMember {
  uint64_t comm_id = 0;   // the previous communicator's id; 0: none (newcomer)
  int32_t old_rank = -1;  // this rank's rank in it
  int32_t old_size = 0;
  uint8_t broken = 0;  // the communicator failed (and was revoked)
  uint8_t shrink = 0;  // NcclFeatures of this rank's loaded NCCL
  uint8_t grow = 0;
  uint8_t revoke = 0;
};

enum class ReformPath { kInit, kReuse, kShrink, kGrow, kShrinkGrow };
const char* ReformPathName(ReformPath p);

struct ReformPlan {
  ReformPath path = ReformPath::kInit;
  std::vector<int> exclude;   // old ranks to drop (kShrink, kShrinkGrow)
  int survivors = 0;          // new ranks [0, survivors) come from the old communicator
  bool abort_parent = false;  // shrink with NCCL_SHRINK_ABORT (ranks were lost, none revoked)
  uint64_t comm_id = 0;       // the old communicator's id
  std::string why;            // for the log: why this path
};

ReformPlan PlanReform(const std::vector<ReformMember>& members);

// The id of the communicator a plan makes, the same on every rank.
uint64_t NextCommId(uint64_t previous, ReformPath path, int size);

}  // namespace khorovod
