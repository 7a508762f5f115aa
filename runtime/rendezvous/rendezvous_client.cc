#include "rendezvous_client.h"

#include <algorithm>
#include <thread>

#include "khorovod/util/random_hex.h"
#include "protocol.h"

namespace khorovod::rendezvous {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

bool IsUnknownWorker(const JsonReply& r) {
  return r.status == 404 && r.code() == error_code::kUnknownWorker;
}
bool IsJobFailed(const JsonReply& r) {
  return r.status == 409 && r.code() == error_code::kJobFailed;
}
bool IsFenced(const JsonReply& r) {
  return r.status == 410 && r.code() == error_code::kWorkerFenced;
}

WorkerIdentity WithIncarnation(WorkerIdentity self) {
  if (!self.incarnation.empty()) return self;
  StatusOr<std::string> id = RandomHex(16);
  // Without a random source the clock still tells processes apart.
  self.incarnation =
      id.ok() ? *id : std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  return self;
}

// The generation's sizes are sent once, not per member.
Placement ParsePlacement(const json& b, int size, int cross_size) {
  return Placement{b.at("rank").get<int>(),       size,
                   b.at("local_rank").get<int>(), b.at("local_size").get<int>(),
                   b.at("cross_rank").get<int>(), cross_size};
}

// Parses a ready answer of the generation endpoint.
StatusOr<GenerationInfo> ParseGeneration(const std::string& what, const json& b) {
  try {
    GenerationInfo g;
    g.generation = b.at("generation").get<int64_t>();
    const int size = b.at("size").get<int>(), cross_size = b.at("cross_size").get<int>();
    static_cast<Placement&>(g) = ParsePlacement(b, size, cross_size);
    g.by_node = g;
    if (const auto n = b.find("by_node"); n != b.end()) {
      g.by_node.local_rank = n->at("local_rank").get<int>();
      g.by_node.local_size = n->at("local_size").get<int>();
      g.by_node.cross_rank = n->at("cross_rank").get<int>();
      g.by_node.cross_size = n->at("cross_size").get<int>();
    }
    g.server_id = b.value("server_id", "");
    for (const json& m : b.at("world")) {
      WorldMember w;
      static_cast<Placement&>(w) = ParsePlacement(m, size, cross_size);
      w.name = m.at("name").get<std::string>();
      w.address = m.at("address").get<std::string>();
      w.slots = m.at("slots").get<int>();
      g.world.push_back(std::move(w));
    }
    if (g.rank < 0 || g.rank >= g.size || static_cast<int>(g.world.size()) != g.size) {
      return Status::Internal(what + ": inconsistent generation answer");
    }
    return g;
  } catch (const json::exception& e) {
    return Status::Internal(what + ": malformed generation answer: " + e.what());
  }
}

}  // namespace

RendezvousClient::RendezvousClient(HttpEndpoint endpoint, std::string job, WorkerIdentity self,
                                   RendezvousClientOptions options)
    : http_(std::move(endpoint), options.retry),
      job_(std::move(job)),
      self_(WithIncarnation(std::move(self))) {}

std::string RendezvousClient::WorkerPathFor(const char* verb) const {
  return WorkerPath(job_, self_.name, verb);
}

json RendezvousClient::Body() const { return {{"incarnation", self_.incarnation}}; }

Status RendezvousClient::Register() {
  MutexLock lock(mu_);
  left_ = false;
  return RegisterLocked();
}

Status RendezvousClient::Register(milliseconds patience) {
  const auto deadline = Clock::now() + std::max(patience, milliseconds(0));
  for (;;) {
    milliseconds retry_after{0};
    Status s;
    {
      MutexLock lock(mu_);
      left_ = false;
      s = RegisterLocked(&retry_after);
    }
    if (s.ok() || retry_after <= milliseconds(0)) return s;
    // At least a few ms, so a 0/1 ms cooldown does not spin.
    const auto wake = Clock::now() + std::max(retry_after, milliseconds(5));
    if (wake > deadline) {
      return Status::Unavailable(s.message() + "; still blacklisted beyond the " +
                                 std::to_string(patience.count()) +
                                 " ms this worker may wait (elastic timeout)");
    }
    std::this_thread::sleep_until(wake);
  }
}

Status RendezvousClient::RegisterLocked(milliseconds* retry_after) {
  if (left_)
    return Status::FailedPrecondition("rendezvous register '" + self_.name +
                                      "': this worker left the job");
  const std::string path = WorkersPath(job_);
  json body = {{"name", self_.name},
               {"address", self_.address},
               {"slots", self_.slots},
               {"incarnation", self_.incarnation}};
  if (self_.slot >= 0) body["slot"] = self_.slot;
  if (!self_.node.empty()) body["node"] = self_.node;
  StatusOr<JsonReply> reply = http_.Post(path, body, milliseconds(0), /*idempotent=*/true);
  if (!reply.ok()) return reply.status();
  if (!reply->ok()) {
    Status s = JsonHttpClient::ToStatus("rendezvous register '" + self_.name + "'", *reply);
    if (reply->status == 429) {
      const int64_t ms = reply->body.value("retry_after_ms", int64_t(0));
      if (retry_after) *retry_after = milliseconds(std::max<int64_t>(1, ms));
      return Status::Unavailable(s.message() + " (retry after " + std::to_string(ms) + " ms)");
    }
    return s;
  }
  last_generation_ = 0;
  ++registrations_;
  server_id_ = reply->body.value("server_id", "");
  int64_t interval = reply->body.value("heartbeat_interval_ms", int64_t(1000));
  heartbeat_interval_ = milliseconds(std::max<int64_t>(1, interval));
  return Status::Ok();
}

StatusOr<HeartbeatInfo> RendezvousClient::Heartbeat() {
  const std::string what = "rendezvous heartbeat '" + self_.name + "'";
  HeartbeatInfo info;
  for (int round = 0; round < 2; ++round) {
    StatusOr<JsonReply> reply =
        http_.Post(WorkerPathFor("heartbeat"), Body(), milliseconds(0), true);
    if (!reply.ok()) return reply.status();
    if (IsFenced(*reply)) {
      info.fenced = true;
      info.generation = reply->body.value("generation", int64_t(0));
      return info;
    }
    if (IsJobFailed(*reply)) {
      info.job_failed = true;
      info.failure_reason = reply->body.value("reason", reply->error());
      info.generation = reply->body.value("generation", int64_t(0));
      return info;
    }
    if (IsUnknownWorker(*reply) && round == 0) {
      MutexLock lock(mu_);
      if (!RegisterLocked().ok()) {
        info.forgotten = true;
        return info;
      }
      info.reregistered = true;
      continue;
    }
    if (!reply->ok()) return JsonHttpClient::ToStatus(what, *reply);
    info.generation = reply->body.value("generation", int64_t(0));
    info.active = reply->body.value("state", "") == "active";
    // After a re-registration the old generation is gone: the worker must reset.
    info.membership_changed = reply->body.value("membership_changed", false) || info.reregistered;
    info.reforming = reply->body.value("reforming", false);
    return info;
  }
  return Status::Unavailable(what +
                             ": the server forgot this worker again right after it re-registered");
}

Status RendezvousClient::Leave(const std::string& reason) {
  {
    MutexLock lock(mu_);
    left_ = true;
  }
  json body = Body();
  if (!reason.empty()) body["reason"] = reason.substr(0, kMaxReasonLength);
  StatusOr<JsonReply> reply = http_.Post(WorkerPathFor("leave"), body, milliseconds(0), true);
  if (!reply.ok()) return reply.status();
  if (reply->ok() || IsUnknownWorker(*reply)) return Status::Ok();
  return JsonHttpClient::ToStatus("rendezvous leave '" + self_.name + "'", *reply);
}

Status RendezvousClient::ReportFailure(const std::string& reason) {
  json body = Body();
  body["reason"] = reason.substr(0, kMaxReasonLength);
  StatusOr<JsonReply> reply = http_.Post(WorkerPathFor("failure"), body, milliseconds(0), true);
  if (!reply.ok()) return reply.status();
  if (reply->ok() || IsUnknownWorker(*reply)) return Status::Ok();
  return JsonHttpClient::ToStatus("rendezvous failure '" + self_.name + "'", *reply);
}

StatusOr<GenerationInfo> RendezvousClient::WaitForNextGeneration(milliseconds timeout) {
  const std::string what = "rendezvous generation '" + self_.name + "'";
  auto deadline = Clock::now() + std::max(timeout, milliseconds(0));
  for (;;) {
    int64_t after;
    uint64_t registration;
    {
      MutexLock lock(mu_);
      after = last_generation_;
      registration = registrations_;
    }
    auto left = std::max(milliseconds(0),
                         std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    milliseconds slice = std::min(kPollSlice, left);
    json body = Body();
    body["after"] = after;
    body["timeout_ms"] = slice.count();
    StatusOr<JsonReply> reply =
        http_.Post(WorkerPathFor("generation"), body, slice, /*idempotent=*/true);
    if (!reply.ok()) return reply.status();
    if (IsUnknownWorker(*reply) ||
        (reply->status == 409 && reply->code() == error_code::kBadGeneration)) {
      // The server restarted (or forgot us): register again unless another
      // thread already did since this request was built.
      milliseconds retry_after{0};
      {
        MutexLock lock(mu_);
        if (registrations_ == registration) {
          if (reply->status == 409 && !IsUnknownWorker(*reply)) {
            return JsonHttpClient::ToStatus(what, *reply);
          }
          Status s = RegisterLocked(&retry_after);
          // A blacklisted re-registration waits out its cooldown within the timeout.
          if (!s.ok() && (retry_after <= milliseconds(0) || Clock::now() + retry_after > deadline))
            return s;
        }
      }
      if (retry_after > milliseconds(0))
        std::this_thread::sleep_for(std::max(retry_after, milliseconds(5)));
      continue;
    }
    if (reply->status == 409 && reply->code() == error_code::kJobFinishing) {
      return Status(StatusCode::kJobFinished, what + ": " + reply->error());
    }
    if (!reply->ok()) return JsonHttpClient::ToStatus(what, *reply);
    if (reply->body.value("ready", false)) {
      StatusOr<GenerationInfo> g = ParseGeneration(what, reply->body);
      if (g.ok()) {
        MutexLock lock(mu_);
        if (registrations_ == registration)
          last_generation_ = std::max(last_generation_, g->generation);
      }
      return g;
    }
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded(what + ": no generation after " + std::to_string(after) +
                                      " within " + std::to_string(timeout.count()) +
                                      " ms (job state " + reply->body.value("state", "unknown") +
                                      ")");
    }
  }
}

int64_t RendezvousClient::last_generation() const {
  MutexLock lock(mu_);
  return last_generation_;
}

std::chrono::milliseconds RendezvousClient::heartbeat_interval() const {
  MutexLock lock(mu_);
  return heartbeat_interval_;
}

std::string RendezvousClient::server_id() const {
  MutexLock lock(mu_);
  return server_id_;
}

}  // namespace khorovod::rendezvous
