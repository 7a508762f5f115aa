#include "core/negotiator.h"

#include <algorithm>
#include <iostream>

#include "common/enforce.h"

namespace khorovod {
namespace {

constexpr uint64_t kFlagNegotiate = 1;
constexpr uint64_t kFlagShutdown = 2;
// Rank 0's stall inspector found a tensor pending past the stall shutdown
// time: every rank ends its session with kAborted (Horovod shuts down).
constexpr uint64_t kFlagStallShutdown = 4;

void SetBit(std::vector<uint64_t>& v, uint32_t bit) { v[bit / 64] |= uint64_t{1} << (bit % 64); }
bool TestBit(const std::vector<uint64_t>& v, uint32_t bit) {
  return (v[bit / 64] >> (bit % 64)) & 1;
}

// Operations on a process set other than the global one always go through
// the coordinator: the cache's readiness bits are ANDed over every rank.
bool Cacheable(const Request& r) {
  return r.op != OpType::kBarrier && r.op != OpType::kJoin && r.op != OpType::kProcessSet &&
         r.process_set == 0;
}

}  // namespace

Negotiator::Negotiator(const Config& config, ControlChannel* channel, TensorQueue* queue)
    : rank_(config.rank),
      size_(config.size),
      // A cached op waiting this long is renegotiated through the coordinator,
      // which is what can report it as stalled with the missing ranks.
      stale_after_(std::clamp(config.stall_warning_time / 4, std::chrono::milliseconds(1),
                              std::chrono::milliseconds(5000))),
      channel_(channel),
      queue_(queue),
      cache_(config.cache_capacity) {
  if (rank_ == 0) {
    coordinator_.emplace(size_);
    stall_inspector_.emplace(
        StallPolicy{config.stall_check, config.stall_warning_time, config.stall_shutdown_time});
  }
}

bool Negotiator::InspectStalls(Clock::time_point now) {
  if (!stall_inspector_ || !stall_inspector_->Due(!coordinator_->empty(), now)) return false;
  auto report = stall_inspector_->Inspect(coordinator_->Pending(), now);
  if (!report) return false;
  // Horovod logs this on the coordinator as a warning (an error when it
  // shuts down); training goes on unless it shuts down.
  std::cerr << "[khorovod] " << (report->shut_down ? "ERROR: " : "WARNING: ") << report->message
            << std::endl;
  if (report->shut_down) stall_shutdown_message_ = report->message;
  return report->shut_down;
}

void Negotiator::Add(PendingOp op) {
  std::string name = op.request.name;
  if (op.request.op == OpType::kJoin) joined_ = true;
  ops_.emplace(std::move(name), LocalOp{std::move(op), State::kNew, 0});
}

void Negotiator::Classify(LocalOp& local, Clock::time_point now, std::vector<uint64_t>& ready,
                          std::vector<uint64_t>& invalid) {
  if (local.state == State::kNew) {
    local.state = State::kToSend;
    if (cache_.enabled() && Cacheable(local.op.request)) {
      ResponseCache::Result r = cache_.Find(local.op.request);
      if (r.lookup == ResponseCache::Lookup::kHit) {
        local.state = State::kCached;
        local.slot = r.slot;
      } else if (r.lookup == ResponseCache::Lookup::kInvalid) {
        SetBit(invalid, r.slot);
      }
    }
  }
  if (local.state == State::kCached) {
    SetBit(ready, local.slot);
    if (now - local.op.submitted > stale_after_) SetBit(invalid, local.slot);
  }
}

std::vector<Response> Negotiator::TakeCachedReady(const std::vector<uint64_t>& ready) {
  std::vector<uint32_t> slots;
  std::map<std::string, int> group_ready;
  for (uint32_t slot = 0; slot < cache_.capacity(); ++slot) {
    if (!TestBit(ready, slot)) continue;
    KH_ENFORCE(cache_.Occupied(slot), "globally ready bit for empty cache slot " << slot);
    slots.push_back(slot);
    const Response& r = cache_.response(slot);
    if (r.group_size > 1) ++group_ready[r.group];
  }
  std::vector<Response> out;
  for (uint32_t slot : slots) {
    const Response& r = cache_.response(slot);
    // A group runs only when all of its members are ready everywhere.
    if (r.group_size > 1 && group_ready[r.group] < r.group_size) continue;
    cache_.Touch(slot);
    out.push_back(r);
  }
  return out;
}

void Negotiator::WriteEagerPayload(uint64_t* block) {
  EagerPayloadWriter writer(block);
  for (const auto& [name, local] : ops_) {
    if (local.state != State::kCached) continue;
    const Response& r = cache_.response(local.slot);
    if (EagerEligible(r)) writer.Append(local.slot, local.op, r);
  }
}

Status Negotiator::TakeEager(size_t message_words, std::vector<uint64_t>& ready, Round* out) {
  const size_t payload_at = message_words - kEagerPayloadWords;
  std::vector<EagerEntries> entries(size_);
  for (int r = 0; r < size_; ++r) {
    const uint64_t* block = out->exchanged.data() + r * message_words + payload_at;
    KH_RETURN_IF_ERROR(ParseEagerPayload(block, r, &entries[r]));
    // Only what rank 0 sent can qualify; most rounds carry nothing.
    if (entries[0].empty()) return Status::Ok();
  }
  // Rank 0's entries are candidates; a slot qualifies when every rank sent
  // it with the same length and it is ready everywhere.
  for (const auto& [slot, first] : entries[0]) {
    if (slot >= cache_.capacity() || !TestBit(ready, slot) || !cache_.Occupied(slot)) continue;
    const Response& r = cache_.response(slot);
    if (!EagerEligible(r) ||
        first.bytes != static_cast<size_t>(r.total_elements()) * DataTypeSize(r.dtype)) {
      continue;
    }
    EagerAllreduce eager{r, {}};
    for (int rank = 0; rank < size_; ++rank) {
      auto it = entries[rank].find(slot);
      if (it == entries[rank].end() || it->second.bytes != first.bytes) break;
      eager.contributions.push_back(it->second.data);
    }
    if (eager.contributions.size() != static_cast<size_t>(size_)) continue;
    ready[slot / 64] &= ~(uint64_t{1} << (slot % 64));
    cache_.Touch(slot);
    out->eager.push_back(std::move(eager));
  }
  return Status::Ok();
}

void Negotiator::RequeueEvicted() {
  for (auto& [name, local] : ops_) {
    if (local.state != State::kCached) continue;
    if (!cache_.Occupied(local.slot) || cache_.name(local.slot) != name) local.state = State::kNew;
  }
}

// RunRound's phases: what this rank has (CollectLocal), what every rank has
// (ExchangeBits), a shutdown, what the cache completes (TakeFromCache), and
// what goes through the coordinator (Negotiate).
Status Negotiator::RunRound(bool shutdown_requested, Clock::time_point now, Round* out) {
  out->responses.clear();
  out->eager.clear();
  out->shutdown = false;
  out->stall_shutdown = false;
  RoundBits bits = CollectLocal(shutdown_requested, now);
  KH_RETURN_IF_ERROR(ExchangeBits(bits, out));
  if (TakeShutdown(bits.flags, out)) return Status::Ok();
  KH_RETURN_IF_ERROR(TakeFromCache(bits, out));
  if (bits.flags & kFlagNegotiate) {
    std::vector<Response> negotiated;
    KH_RETURN_IF_ERROR(Negotiate(std::move(bits.to_send), now, &negotiated));
    for (auto& r : negotiated) out->responses.push_back(std::move(r));
    RequeueEvicted();
  }
  out->idle = !(bits.flags & kFlagNegotiate) && out->responses.empty() && out->eager.empty();
  return Status::Ok();
}

// This rank's cache bits (ready, invalid), the requests it sends to the
// coordinator, and its flags.
Negotiator::RoundBits Negotiator::CollectLocal(bool shutdown_requested, Clock::time_point now) {
  RoundBits bits;
  bits.words = (cache_.capacity() + 63) / 64;
  bits.ready.assign(bits.words, 0);
  bits.invalid.assign(bits.words, 0);
  for (auto& [name, local] : ops_) {
    Classify(local, now, bits.ready, bits.invalid);
    if (local.state == State::kToSend) {
      bits.to_send.push_back(local.op.request);
      local.state = State::kSent;
    }
  }
  if (joined_) {
    // A joined rank stands ready for every allreduce (it contributes zeros).
    for (uint32_t slot = 0; slot < cache_.capacity(); ++slot) {
      if (cache_.Occupied(slot) && cache_.response(slot).op == OpType::kAllreduce)
        SetBit(bits.ready, slot);
    }
  }
  if (!bits.to_send.empty()) bits.flags |= kFlagNegotiate;
  if (shutdown_requested) bits.flags |= kFlagShutdown;
  if (InspectStalls(now)) bits.flags |= kFlagStallShutdown;
  return bits;
}

// One allgather of every rank's bits (and eager payload); on return `bits`
// holds the job's: flags any rank set, slots ready on every rank and not
// invalid on any.
Status Negotiator::ExchangeBits(RoundBits& bits, Round* out) {
  const size_t words = bits.words;
  const size_t bit_words = 1 + 2 * words;
  bits.message_words = bit_words + kEagerPayloadWords;
  std::vector<uint64_t> vec(bits.message_words, 0);
  vec[0] = ~bits.flags;
  std::copy(bits.ready.begin(), bits.ready.end(), vec.begin() + 1);
  for (size_t i = 0; i < words; ++i) vec[1 + words + i] = ~bits.invalid[i];
  if (!joined_) WriteEagerPayload(vec.data() + bit_words);
  KH_RETURN_IF_ERROR(channel_->AllgatherWords(vec, &out->exchanged));
  KH_ENFORCE(out->exchanged.size() == bits.message_words * size_,
             "control exchange returned " << out->exchanged.size() << " words");
  for (int r = 0; r < size_; ++r) {
    const uint64_t* theirs = out->exchanged.data() + r * bits.message_words;
    for (size_t i = 0; i < bit_words; ++i) vec[i] &= theirs[i];
  }
  bits.flags = ~vec[0];
  for (size_t i = 0; i < words; ++i) {
    bits.invalid[i] = ~vec[1 + words + i];
    bits.ready[i] = vec[1 + i] & ~bits.invalid[i];
  }
  return Status::Ok();
}

// A shutdown any rank asked for, or a stall shutdown: true when the round
// ends here.
bool Negotiator::TakeShutdown(uint64_t global_flags, Round* out) {
  if (global_flags & kFlagStallShutdown) {
    out->shutdown = true;
    out->stall_shutdown = true;
    out->shutdown_reason = stall_shutdown_message_.empty()
                               ? "the job shut down: rank 0 found a tensor that some ranks had not "
                                 "submitted for longer than "
                                 "the stall shutdown time (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS); "
                                 "rank 0's log names the tensors "
                                 "and the ranks"
                               : "the job shut down on a stall: " + stall_shutdown_message_;
    return true;
  }
  if (global_flags & kFlagShutdown) {
    out->shutdown = true;
    return true;
  }
  return false;
}

// Cached operations ready everywhere: eager ones complete from the
// exchanged payloads, the others become responses; slots any rank
// invalidated are erased, and their operations negotiated again.
Status Negotiator::TakeFromCache(RoundBits& bits, Round* out) {
  KH_RETURN_IF_ERROR(TakeEager(bits.message_words, bits.ready, out));
  out->responses = TakeCachedReady(bits.ready);
  for (uint32_t slot = 0; slot < cache_.capacity(); ++slot) {
    if (TestBit(bits.invalid, slot)) cache_.Erase(slot);
  }
  RequeueEvicted();
  return Status::Ok();
}

Status Negotiator::Negotiate(std::vector<Request> to_send, Clock::time_point now,
                             std::vector<Response>* out) {
  for (Request& r : to_send) r.rank = rank_;
  std::vector<std::string> gathered;
  KH_RETURN_IF_ERROR(channel_->GatherToRoot(EncodeRequests(to_send), &gathered));
  std::string encoded;
  if (coordinator_) {
    for (const std::string& bytes : gathered) {
      std::vector<Request> requests;
      KH_RETURN_IF_ERROR(DecodeRequests(bytes, &requests));
      for (const Request& r : requests) coordinator_->Add(r, now);
    }
    encoded = EncodeResponses(coordinator_->Collect());
  }
  KH_RETURN_IF_ERROR(channel_->BroadcastFromRoot(&encoded));
  std::vector<Response> responses;
  KH_RETURN_IF_ERROR(DecodeResponses(encoded, &responses));
  for (Response& r : responses) {
    if (r.kind == Response::Kind::kError || r.op == OpType::kJoin) {
      Deliver(r);
      continue;
    }
    if (cache_.enabled() && ResponseCache::Cacheable(r)) {
      auto it = ops_.find(r.names.front());
      cache_.Put(r, it == ops_.end() ? nullptr : &it->second.op.request);
    }
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

void Negotiator::Deliver(const Response& response) {
  if (response.op == OpType::kJoin) {
    joined_ = false;
    if (auto op = Take(response.names.front())) {
      op->completion->SetJoinLastRank(response.join_last_rank);
      queue_->Complete(*op, Status::Ok());
    }
    return;
  }
  for (const std::string& name : response.names) {
    auto it = ops_.find(name);
    // The same name may be in flight here in another process set.
    if (it == ops_.end() || it->second.op.request.process_set != response.process_set) continue;
    if (auto op = Take(name))
      queue_->Complete(*op, Status(response.error_code, response.error_message));
  }
}

std::optional<PendingOp> Negotiator::Take(const std::string& name) {
  auto it = ops_.find(name);
  if (it == ops_.end()) return std::nullopt;
  PendingOp op = std::move(it->second.op);
  ops_.erase(it);
  return op;
}

void Negotiator::FailAll(const Status& status) {
  for (auto& [name, local] : ops_) queue_->Complete(local.op, status);
  ops_.clear();
}

}  // namespace khorovod
