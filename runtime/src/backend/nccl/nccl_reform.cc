#include "backend/nccl/nccl_reform.h"

namespace khorovod {
namespace {

ReformPlan Init(std::string why) {
  ReformPlan p;
  p.why = std::move(why);
  return p;
}

// The survivors must be new ranks [0, k) with increasing old ranks of one
// communicator, and every later rank a newcomer. Returns k, or -1 with why.
int SurvivorPrefix(const std::vector<ReformMember>& m, uint64_t id, int old_size,
                   std::string* why) {
  int k = 0;
  while (k < static_cast<int>(m.size()) && m[k].comm_id == id) ++k;
  for (int r = k; r < static_cast<int>(m.size()); ++r) {
    if (m[r].comm_id != 0) {
      *why = m[r].comm_id == id ? "the survivors are not the first ranks of the new session"
                                : "rank " + std::to_string(r) + " comes from another communicator";
      return -1;
    }
  }
  for (int r = 0; r < k; ++r) {
    if (m[r].old_size != old_size || m[r].old_rank < 0 || m[r].old_rank >= old_size ||
        (r > 0 && m[r].old_rank <= m[r - 1].old_rank)) {
      *why = "the survivors' new ranks do not keep their old order";
      return -1;
    }
  }
  return k;
}

}  // namespace

const char* ReformPathName(ReformPath p) {
  switch (p) {
    case ReformPath::kInit:
      return "init";
    case ReformPath::kReuse:
      return "reuse";
    case ReformPath::kShrink:
      return "shrink";
    case ReformPath::kGrow:
      return "grow";
    case ReformPath::kShrinkGrow:
      return "shrink+grow";
  }
  return "?";
}

ReformPlan PlanReform(const std::vector<ReformMember>& m) {
  if (m.empty() || m[0].comm_id == 0) {
    bool any = false;
    for (const ReformMember& x : m) any = any || x.comm_id != 0;
    return Init(any ? "new rank 0 brings no communicator" : "no previous communicator");
  }
  const uint64_t id = m[0].comm_id;
  const int old_size = m[0].old_size;
  std::string why;
  const int k = SurvivorPrefix(m, id, old_size, &why);
  if (k < 0) return Init(why);
  bool shrink = true, grow = true, broken = false, all_revoked = true;
  for (const ReformMember& x : m) {
    shrink = shrink && x.shrink;
    grow = grow && x.grow;
  }
  for (int r = 0; r < k; ++r) {
    broken = broken || m[r].broken;
    all_revoked = all_revoked && m[r].revoke;
  }
  const int lost = old_size - k;
  const int joined = static_cast<int>(m.size()) - k;
  ReformPlan p;
  p.comm_id = id;
  p.survivors = k;
  if (lost == 0 && joined == 0) {
    if (broken) return Init("the communicator failed but no rank was lost");
    p.path = ReformPath::kReuse;
    p.why = "same ranks, same order";
    return p;
  }
  if (broken && !all_revoked) return Init("a broken communicator was not revoked");
  if (lost > 0 && !shrink)
    return Init("the loaded NCCL cannot shrink (needs 2.27+ with ncclCommShrink)");
  if (joined > 0 && !grow)
    return Init("the loaded NCCL cannot grow (needs 2.29+ with ncclCommGrow)");
  if (joined > 0 && broken && lost == 0)
    return Init("the communicator failed but no rank was lost");
  std::vector<bool> present(old_size, false);
  for (int r = 0; r < k; ++r) present[m[r].old_rank] = true;
  for (int o = 0; o < old_size; ++o) {
    if (!present[o]) p.exclude.push_back(o);
  }
  p.abort_parent = lost > 0 && !broken;
  p.path =
      lost > 0 ? (joined > 0 ? ReformPath::kShrinkGrow : ReformPath::kShrink) : ReformPath::kGrow;
  p.why = std::to_string(lost) + " lost, " + std::to_string(joined) + " joined";
  return p;
}

uint64_t NextCommId(uint64_t previous, ReformPath path, int size) {
  // splitmix64 of the inputs: distinct for each step, never 0.
  uint64_t x = previous ^ (static_cast<uint64_t>(path) << 56) ^ static_cast<uint64_t>(size);
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

}  // namespace khorovod
