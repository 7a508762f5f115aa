#include "core/coordinator.h"

#include <numeric>
#include <set>
#include <sstream>

#include "common/enforce.h"
#include "core/process_set_table.h"

namespace khorovod {
namespace {

template <typename T, typename Fmt>
std::optional<std::string> Disagreement(const std::vector<std::optional<Request>>& by_rank,
                                        const char* field, T (*get)(const Request&), Fmt fmt) {
  const Request* first = nullptr;
  for (const auto& r : by_rank) {
    if (!r) continue;
    if (!first) {
      first = &*r;
      continue;
    }
    if (!(get(*r) == get(*first))) {
      std::ostringstream os;
      os << "mismatched " << field << ":";
      for (size_t i = 0; i < by_rank.size(); ++i) {
        if (by_rank[i]) os << " rank " << i << " has " << fmt(get(*by_rank[i])) << ";";
      }
      std::string s = os.str();
      s.pop_back();
      return s;
    }
  }
  return std::nullopt;
}

Shape TrailingDims(const Shape& s) { return s.empty() ? Shape{} : Shape(s.begin() + 1, s.end()); }

using ByRank = std::vector<std::optional<Request>>;
using R = const Request&;

std::string FormatShape(const Shape& s) { return ShapeToString(s); }
template <typename T>
std::string FormatNumber(T v) {
  return std::to_string(v);
}

// CheckAgreement's phases: the fields every operation agrees on, then the
// fields of each kind of operation.
std::optional<std::string> CommonDisagreement(const ByRank& by_rank) {
  if (auto d = Disagreement(
          by_rank, "operation", +[](R r) { return r.op; },
          [](OpType o) { return std::string(OpTypeName(o)); }))
    return d;
  if (auto d = Disagreement(
          by_rank, "dtype", +[](R r) { return r.dtype; },
          [](DataType t) { return std::string(DataTypeName(t)); }))
    return d;
  return Disagreement(
      by_rank, "device", +[](R r) { return r.device.kind; },
      [](DeviceKind k) { return k == DeviceKind::kCPU ? "cpu" : "cuda"; });
}

std::optional<std::string> ReduceDisagreement(const ByRank& by_rank, const Request& first) {
  if (auto d = Disagreement(
          by_rank, "reduce op", +[](R r) { return r.reduce_op; },
          [](ReduceOp o) { return std::string(ReduceOpName(o)); }))
    return d;
  if (auto d = Disagreement(
          by_rank, "prescale factor", +[](R r) { return r.prescale; }, FormatNumber<double>))
    return d;
  if (auto d = Disagreement(
          by_rank, "postscale factor", +[](R r) { return r.postscale; }, FormatNumber<double>))
    return d;
  if (auto d = Disagreement(
          by_rank, "shape", +[](R r) { return r.shape; }, FormatShape))
    return d;
  if (auto d = Disagreement(
          by_rank, "group", +[](R r) { return r.group; },
          [](const std::string& g) { return "'" + g + "'"; }))
    return d;
  if (first.op == OpType::kReducescatter && first.shape.empty()) {
    return std::string("reducescatter needs a tensor with at least one dimension");
  }
  return std::nullopt;
}

std::optional<std::string> BroadcastDisagreement(const ByRank& by_rank, const Request& first,
                                                 const std::vector<int>& members,
                                                 int32_t process_set) {
  if (auto d = Disagreement(
          by_rank, "root rank", +[](R r) { return r.root; }, FormatNumber<int32_t>))
    return d;
  if (IndexIn(members, first.root) < 0) {
    return "root rank " + std::to_string(first.root) + " is not a member of process set " +
           std::to_string(process_set) + " " + RankListString(members);
  }
  return Disagreement(
      by_rank, "shape", +[](R r) { return r.shape; }, FormatShape);
}

std::optional<std::string> GatherDisagreement(const ByRank& by_rank, const Request& first) {
  if (auto d = Disagreement(
          by_rank, "rank (number of dimensions)", +[](R r) { return r.shape.size(); },
          FormatNumber<size_t>))
    return d;
  if (first.shape.empty())
    return std::string(OpTypeName(first.op)) + " needs a tensor with at least one dimension";
  return Disagreement(
      by_rank, "shape beyond the first dimension", +[](R r) { return TrailingDims(r.shape); },
      FormatShape);
}

std::optional<std::string> ProcessSetDisagreement(const ByRank& by_rank) {
  if (auto d = Disagreement(
          by_rank, "process set ranks", +[](R r) { return r.splits; },
          [](const std::vector<int64_t>& v) {
            return RankListString(std::vector<int>(v.begin(), v.end()));
          }))
    return d;
  return Disagreement(
      by_rank, "process set to remove", +[](R r) { return r.root; }, FormatNumber<int32_t>);
}

}  // namespace

Coordinator::Coordinator(int size) : size_(size), joined_(size, false) {
  std::vector<int> all(static_cast<size_t>(size));
  std::iota(all.begin(), all.end(), 0);
  sets_.emplace(0, std::move(all));
}

void Coordinator::Add(const Request& request, Clock::time_point now) {
  KH_ENFORCE(request.rank >= 0 && request.rank < size_, "request from rank " << request.rank);
  if (request.op == OpType::kJoin) {
    if (!joined_[request.rank]) {
      joined_[request.rank] = true;
      ++joined_count_;
    }
    last_joined_ = request.rank;
    return;
  }
  const auto key = std::make_pair(request.process_set, request.name);
  auto it = by_name_.find(key);
  if (it == by_name_.end()) {
    Entry e;
    e.name = request.name;
    e.process_set = request.process_set;
    if (auto set = sets_.find(request.process_set); set != sets_.end()) e.members = set->second;
    e.by_rank.resize(size_);
    e.first_seen = now;
    table_.push_back(std::move(e));
    it = by_name_.emplace(key, std::prev(table_.end())).first;
  }
  Entry& e = *it->second;
  // A rank cannot have the same name in flight twice (enqueue rejects it), so
  // a second request from the same rank can only replace a stale one.
  if (!e.by_rank[request.rank]) ++e.submitted;
  e.by_rank[request.rank] = request;
}

bool Coordinator::Ready(const Entry& e) const {
  if (e.members.empty()) return false;  // an unregistered set: reported by Collect's sweep
  if (e.submitted == static_cast<int>(e.members.size())) return true;
  if (joined_count_ == 0) return false;
  // An operation other than allreduce cannot complete while a member has
  // joined (it submits nothing until every rank has joined), so it fails at
  // once with JoinConflict's error instead of waiting for the other members:
  // their unnamed-call counters may have drifted apart (a rank whose
  // collective was refused counted one more), and they would wait forever.
  if (JoinConflict(e)) return true;
  for (int r : e.members) {
    if (!e.by_rank[r] && !joined_[r]) return false;
  }
  return true;
}

std::optional<std::string> Coordinator::CheckAgreement(const Entry& e) const {
  if (auto d = CommonDisagreement(e.by_rank)) return d;
  const Request* first = nullptr;
  for (const auto& r : e.by_rank) {
    if (r) {
      first = &*r;
      break;
    }
  }
  KH_ENFORCE(first != nullptr, "ready entry without requests");
  switch (first->op) {
    case OpType::kAllreduce:
    case OpType::kReducescatter:
      return ReduceDisagreement(e.by_rank, *first);
    case OpType::kBroadcast:
      return BroadcastDisagreement(e.by_rank, *first, e.members, e.process_set);
    case OpType::kAllgather:
    case OpType::kAlltoall:
      return GatherDisagreement(e.by_rank, *first);
    case OpType::kProcessSet:
      return ProcessSetDisagreement(e.by_rank);
    case OpType::kBarrier:
    case OpType::kJoin:
      break;
  }
  return std::nullopt;
}

std::optional<std::string> Coordinator::JoinConflict(const Entry& e) const {
  for (int r : e.members) {
    if (!joined_[r] || e.by_rank[r]) continue;
    for (const auto& req : e.by_rank) {
      if (req && req->op != OpType::kAllreduce) {
        return std::string(OpTypeName(req->op)) + " is not supported while rank " +
               std::to_string(r) + " has joined; only allreduce is";
      }
    }
  }
  return std::nullopt;
}

Response Coordinator::BuildResponse(const Entry& e) const {
  const Request* first = nullptr;
  for (const auto& r : e.by_rank) {
    if (r) {
      first = &*r;
      break;
    }
  }
  Response p;
  p.kind = Response::Kind::kExecute;
  p.op = first->op;
  p.names = {e.name};
  p.dtype = first->dtype;
  p.reduce_op = first->reduce_op;
  p.root = first->root;
  p.device = first->device;
  p.prescale = first->prescale;
  p.postscale = first->postscale;
  p.group = first->group;
  p.group_size = first->group_size;
  p.process_set = e.process_set;
  const int set_size = static_cast<int>(e.members.size());
  int64_t row = 1;
  for (size_t d = 1; d < first->shape.size(); ++d) row *= first->shape[d];
  switch (p.op) {
    case OpType::kAllreduce:
      p.sizes = {NumElements(first->shape)};
      break;
    case OpType::kBroadcast:
      p.sizes = {NumElements(first->shape)};
      p.root = IndexIn(e.members, first->root);  // the set's own numbering
      break;
    case OpType::kReducescatter:
      p.sizes = {first->shape[0]};
      p.row_elements = row;
      break;
    case OpType::kAllgather:
      p.row_elements = row;
      for (int m : e.members) p.sizes.push_back(e.by_rank[m]->shape[0]);
      break;
    case OpType::kAlltoall:
      p.row_elements = row;
      for (int m : e.members) {
        const auto& r = e.by_rank[m];
        if (r->splits.empty()) {
          for (int i = 0; i < set_size; ++i) p.sizes.push_back(r->shape[0] / set_size);
        } else {
          p.sizes.insert(p.sizes.end(), r->splits.begin(), r->splits.end());
        }
      }
      break;
    case OpType::kBarrier:
    case OpType::kJoin:
    case OpType::kProcessSet:
      break;
  }
  return p;
}

Response Coordinator::ErrorFor(const Entry& e, StatusCode code, const std::string& message) const {
  Response p;
  p.kind = Response::Kind::kError;
  for (const auto& r : e.by_rank) {
    if (r) {
      p.op = r->op;
      break;
    }
  }
  p.names = {e.name};
  p.process_set = e.process_set;
  p.error_code = code;
  p.error_message = "tensor '" + e.name + "': " + message;
  return p;
}

std::vector<PendingTensor> Coordinator::Pending() const {
  std::vector<PendingTensor> out;
  for (const Entry& e : table_) {
    PendingTensor t{e.name, {}, e.first_seen};
    for (int r : e.members) {
      if (!e.by_rank[r] && !joined_[r]) t.missing_ranks.push_back(r);
    }
    out.push_back(std::move(t));
  }
  return out;
}

Response Coordinator::ApplyProcessSet(const Entry& e) {
  Response p = BuildResponse(e);
  const Request& req = *e.by_rank[0];
  if (req.root > 0) {  // removal
    if (!sets_.erase(req.root)) {
      return ErrorFor(e, StatusCode::kInvalidArgument,
                      "process set " + std::to_string(req.root) + " is not registered");
    }
    // Its pending operations are reported (as unregistered) by Collect.
    for (Entry& pending : table_) {
      if (pending.process_set == req.root) pending.members.clear();
    }
    p.process_set = req.root;
    return p;
  }
  if (req.root == 0)
    return ErrorFor(e, StatusCode::kInvalidArgument, "the global process set cannot be removed");
  std::vector<int> ranks(req.splits.begin(), req.splits.end());
  if (ranks.empty())
    return ErrorFor(e, StatusCode::kInvalidArgument, "a process set needs at least one rank");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size_ || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return ErrorFor(e, StatusCode::kInvalidArgument,
                      "process set ranks " + RankListString(ranks) +
                          " must be distinct, ascending and in [0, " + std::to_string(size_) + ")");
    }
  }
  for (const auto& [id, members] : sets_) {
    if (members == ranks) {
      return ErrorFor(e, StatusCode::kInvalidArgument,
                      "a process set with ranks " + RankListString(ranks) +
                          " is already registered (id " + std::to_string(id) + ")");
    }
  }
  p.process_set = next_set_id_++;
  p.members.assign(ranks.begin(), ranks.end());
  sets_.emplace(p.process_set, std::move(ranks));
  return p;
}

// A rank has one name in flight at a time, so a rank that submitted `name`
// in set A cannot submit it in set B before A's operation completes. When
// A waits for such a rank and B waits for a rank that submitted it in A,
// neither can ever complete.
std::vector<std::list<Coordinator::Entry>::iterator> Coordinator::CrossSetConflicts() const {
  std::vector<std::list<Entry>::iterator> out;
  auto waits_on = [](const Entry& waiting, const Entry& holder) {
    for (int r : waiting.members) {
      if (!waiting.by_rank[r] && holder.by_rank[r]) return true;
    }
    return false;
  };
  for (auto a = by_name_.begin(); a != by_name_.end(); ++a) {
    for (auto b = by_name_.begin(); b != by_name_.end(); ++b) {
      if (a->first.second != b->first.second || a->first.first == b->first.first) continue;
      if (waits_on(*a->second, *b->second) && waits_on(*b->second, *a->second)) {
        out.push_back(a->second);
        break;
      }
    }
  }
  return out;
}

// Collect's phases, in order; each appends its responses to `out`.
std::vector<Response> Coordinator::Collect() {
  std::vector<Response> out;
  if (sets_.size() > 1) ReleaseCrossSetConflicts(out);
  ReleaseReady(out);
  ReleaseUnregistered(out);
  ReleaseJoin(out);
  return out;
}

void Coordinator::Drop(std::list<Entry>::iterator it) {
  by_name_.erase({it->process_set, it->name});
  table_.erase(it);
}

void Coordinator::ReleaseCrossSetConflicts(std::vector<Response>& out) {
  const auto conflicts = CrossSetConflicts();
  for (auto it : conflicts) {
    std::string where;
    for (const auto& [key, other] : by_name_) {
      if (key.second != it->name) continue;
      std::vector<int> ranks;
      for (int r = 0; r < size_; ++r) {
        if (other->by_rank[r]) ranks.push_back(r);
      }
      where +=
          " process set " + std::to_string(key.first) + " by ranks " + RankListString(ranks) + ";";
    }
    where.pop_back();
    out.push_back(
        ErrorFor(*it, StatusCode::kMismatch, "submitted in different process sets:" + where));
  }
  for (auto it : conflicts) Drop(it);
}

// Ready entries in arrival order: an error when they conflict with a join
// or disagree, else a response (a group's members together, once all are
// ready; a process set change applied at once).
void Coordinator::ReleaseReady(std::vector<Response>& out) {
  ReadyGroups ready_groups;
  for (auto it = table_.begin(); it != table_.end();) {
    auto next = std::next(it);
    if (Ready(*it) && ReleaseOne(it, ready_groups, out)) Drop(it);
    it = next;
  }
}

// Whether the ready entry `it` leaves the table now (the other members of
// a complete group are dropped here; `it` by the caller).
bool Coordinator::ReleaseOne(std::list<Entry>::iterator it, ReadyGroups& ready_groups,
                             std::vector<Response>& out) {
  Entry& e = *it;
  if (auto conflict = JoinConflict(e)) {
    out.push_back(ErrorFor(e, StatusCode::kFailedPrecondition, *conflict));
    return true;
  }
  if (auto problem = CheckAgreement(e)) {
    out.push_back(ErrorFor(e, StatusCode::kMismatch, *problem));
    return true;
  }
  const Request* any = nullptr;
  for (const auto& r : e.by_rank) {
    if (r) any = &*r;
  }
  if (any->op == OpType::kProcessSet) {
    out.push_back(ApplyProcessSet(e));
    return true;
  }
  if (any->group_size <= 1) {
    out.push_back(BuildResponse(e));
    return true;
  }
  auto& members = ready_groups[any->group];
  members.push_back(it);
  if (static_cast<int>(members.size()) < any->group_size) return false;
  for (auto m : members) {
    out.push_back(BuildResponse(*m));
    if (m != it) Drop(m);
  }
  return true;
}

// Operations on a set that is not registered (never was, or a removal,
// maybe in this very round, dropped it).
void Coordinator::ReleaseUnregistered(std::vector<Response>& out) {
  for (auto it = table_.begin(); it != table_.end();) {
    auto next = std::next(it);
    if (it->members.empty()) {
      out.push_back(ErrorFor(*it, StatusCode::kFailedPrecondition,
                             "process set " + std::to_string(it->process_set) +
                                 " is not registered (removed, or never added)"));
      Drop(it);
    }
    it = next;
  }
}

// Every rank joined: one kJoin response, and the count starts again.
void Coordinator::ReleaseJoin(std::vector<Response>& out) {
  if (joined_count_ != size_) return;
  Response p;
  p.op = OpType::kJoin;
  p.names = {"khorovod.join"};
  p.join_last_rank = last_joined_;
  out.push_back(std::move(p));
  std::fill(joined_.begin(), joined_.end(), false);
  joined_count_ = 0;
  last_joined_ = -1;
}

}  // namespace khorovod
