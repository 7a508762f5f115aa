// Wire-level constants of the rendezvous HTTP API, shared by the server
// (khorovod_rendezvous_server) and the worker-side client
// (khorovod_rendezvous_client). The API itself is described in README.md in
// this directory; this header only names the strings both sides must agree on.
//
// Thread-safety: constants and pure functions only.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace khorovod::rendezvous {

// Machine-readable error codes carried in the "code" field of every error
// body ({"error": "<text>", "code": "<code>"}).
namespace error_code {
inline constexpr const char* kUnauthenticated = "unauthenticated";       // 401
inline constexpr const char* kInvalidArgument = "invalid_argument";      // 400
inline constexpr const char* kNotFound = "not_found";                    // 404 (no such endpoint)
inline constexpr const char* kUnknownJob = "unknown_job";                // 404
inline constexpr const char* kUnknownWorker = "unknown_worker";          // 404
inline constexpr const char* kUnknownGeneration = "unknown_generation";  // 404
inline constexpr const char* kKeyNotFound = "key_not_found";             // 404
inline constexpr const char* kGenerationGone = "generation_gone";        // 410
inline constexpr const char* kGenerationOver =
    "generation_over";  // 410 (KV wait: it will never form)
inline constexpr const char* kWorkerFenced =
    "worker_fenced";  // 410 (this incarnation was declared lost)
inline constexpr const char* kBadGeneration = "bad_generation";  // 409
inline constexpr const char* kJobFailed = "job_failed";          // 409
inline constexpr const char* kJobFinishing =
    "job_finishing";  // 409 (generation: no more will form)
inline constexpr const char* kNotAnInteger = "not_an_integer";        // 409
inline constexpr const char* kPayloadTooLarge = "payload_too_large";  // 413
inline constexpr const char* kUriTooLong = "uri_too_long";            // 414
inline constexpr const char* kBlacklisted = "blacklisted";            // 429
inline constexpr const char* kInternal = "internal";                  // 500
inline constexpr const char* kShuttingDown = "shutting_down";         // 503
inline constexpr const char* kStoreFull = "store_full";               // 507
}  // namespace error_code

// Upper bounds on identifiers. Job and worker names appear in URL paths, so
// they are restricted to [A-Za-z0-9._:-] and must start with an alphanumeric.
inline constexpr size_t kMaxNameLength = 253;
inline constexpr size_t kMaxAddressLength = 253;
inline constexpr size_t kMaxKeyLength = 1024;
inline constexpr size_t kMaxReasonLength = 1024;
inline constexpr int kMaxSlots = 4096;

// One long-poll asks the server for at most this long; the server may cap it
// lower and answer early, and the client asks again until its deadline.
inline constexpr std::chrono::milliseconds kPollSlice{20000};

// The leave reason of a worker whose training finished. Once a member of the
// current generation leaves with it, the job is finishing: no generation
// forms any more and waiting workers are told so (409 job_finishing).
inline constexpr const char* kLeaveFinished = "finished";

// Every request and reply body is JSON.
inline constexpr const char* kJsonContentType = "application/json";

// Paths (prefix every job-scoped path with JobPath(job)).
inline std::string JobPath(std::string_view job) { return "/v1/jobs/" + std::string(job); }
inline std::string WorkersPath(std::string_view job) { return JobPath(job) + "/workers"; }
inline std::string WorkerPath(std::string_view job, std::string_view worker,
                              std::string_view verb) {
  return WorkersPath(job) + "/" + std::string(worker) + "/" + std::string(verb);
}
inline std::string KvPath(std::string_view job, long long generation, std::string_view op) {
  return JobPath(job) + "/generations/" + std::to_string(generation) + "/kv/" + std::string(op);
}

// True for a valid job or worker name (see kMaxNameLength).
inline bool IsValidName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (i == 0 && !alnum) return false;
    if (!alnum && c != '.' && c != '_' && c != ':' && c != '-') return false;
  }
  return true;
}

}  // namespace khorovod::rendezvous
