// NcclLibrary: the libnccl this process uses, opened at run time with dlopen.
//
// khorovod compiles against a current nccl.h (scripts/install-cuda.sh: the
// 2.32 headers from PyPI) but never links libnccl, so one build runs over
// whichever NCCL >= 2.27 a machine has: the system's, NVIDIA's wheel, or the
// copy PyTorch bundles. Search order (NcclSearchOrder):
//   1. KHOROVOD_NCCL_LIBRARY (Config::nccl_library): that file and nothing
//      else; a failure to load it, or a version below 2.27, is an error;
//   2. "libnccl.so.2" through the dynamic linker: a libnccl already loaded
//      into the process (PyTorch's, when torch was imported first: one NCCL
//      per process), then LD_LIBRARY_PATH, the runpath, ld.so.cache;
//   3. nvidia/nccl/lib/libnccl.so.2 under each PYTHONPATH entry, then
//      $VIRTUAL_ENV's and the system's site-packages/dist-packages (the
//      nvidia-nccl-cu12/-cu13 wheels, which torch's wheels depend on).
// The first candidate that loads, has every required symbol and reports a
// version >= 2.27 wins; older or broken ones are skipped, and the error for
// "none found" lists each candidate with the reason it was skipped.
//
// The newer fault-tolerance calls are optional (NcclFeatures): they are
// used only when the loaded library exports the symbol and its version is
// one that has the call (shrink 2.27, grow 2.29, revoke: symbol only;
// NCCL_MULTI_RANK_GPU_ENABLE 2.30).
//
// Thread-safety: a loaded NcclLibrary is immutable and shared; Load() may be
// called from any thread. The dlopen handle is process-wide by nature: the
// library is loaded once per (override) path and never closed, since
// communicators of an earlier session may still be aborting.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/nccl/nccl_api.h"
#include "khorovod/status.h"

namespace khorovod {

// The oldest NCCL the backend loads: the first with ncclCommShrink.
inline constexpr int kMinNcclVersionCode = 22700;

struct NcclVersion {
  int major = 0, minor = 0, patch = 0;
  // NCCL's own formula: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
  static NcclVersion FromCode(int code);
  int code() const;
  std::string str() const;
};

// Which optional symbols a library exports.
struct NcclSymbols {
  bool shrink = false;          // ncclCommShrink
  bool revoke = false;          // ncclCommRevoke
  bool grow = false;            // ncclCommGrow
  bool comm_unique_id = false;  // ncclCommGetUniqueId (the grow root's id)
};

// What the backend may use, decided from the version and the symbols.
struct NcclFeatures {
  bool shrink = false;
  bool revoke = false;
  bool grow = false;
  bool multi_rank_gpu_env = false;  // NCCL_MULTI_RANK_GPU_ENABLE is honoured
  static NcclFeatures Of(const NcclVersion& version, const NcclSymbols& symbols);
  std::string str() const;  // "shrink=yes revoke=no grow=no multi_rank_gpu=no"
};

// The candidate paths, in the order described above. `env` holds the
// variables it reads (PYTHONPATH, VIRTUAL_ENV); `override_path` is
// KHOROVOD_NCCL_LIBRARY. Glob patterns are expanded here.
std::vector<std::string> NcclSearchOrder(const std::string& override_path,
                                         const std::map<std::string, std::string>& env);

// The fault-tolerance calls, declared here so that any nccl.h >= 2.27 builds.
using NcclCommShrinkFn = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
using NcclCommRevokeFn = ncclResult_t (*)(ncclComm_t, int);
using NcclCommGrowFn = ncclResult_t (*)(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*,
                                        ncclConfig_t*);
using NcclCommGetUniqueIdFn = ncclResult_t (*)(ncclComm_t, ncclUniqueId*);
inline constexpr int kNcclShrinkDefault = 0x00;
inline constexpr int kNcclShrinkAbort = 0x01;  // abort the parent's in-flight work first

class NcclLibrary {
 public:
  // The library for this override (empty: search). Loaded once per path,
  // then shared; a failure is returned again on every call.
  static StatusOr<std::shared_ptr<const NcclLibrary>> Load(const std::string& override_path);
  // Opens exactly `path` (tests use this on fixture libraries).
  static StatusOr<std::shared_ptr<const NcclLibrary>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  const NcclVersion& version() const { return version_; }
  const NcclFeatures& features() const { return features_; }
  // "NCCL 2.28.9 from /path (shrink=yes ...)".
  std::string Describe() const;

  // Required symbols (present in every NCCL >= 2.27).
  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  decltype(&::ncclRedOpCreatePreMulSum) RedOpCreatePreMulSum = nullptr;
  decltype(&::ncclRedOpDestroy) RedOpDestroy = nullptr;
  // Optional: null unless features() says the call may be used.
  NcclCommShrinkFn CommShrink = nullptr;
  NcclCommRevokeFn CommRevoke = nullptr;
  NcclCommGrowFn CommGrow = nullptr;
  NcclCommGetUniqueIdFn CommGetUniqueId = nullptr;

 private:
  NcclLibrary() = default;
  std::string path_;
  NcclVersion version_;
  NcclFeatures features_;
};

}  // namespace khorovod
