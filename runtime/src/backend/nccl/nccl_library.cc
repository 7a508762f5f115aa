#include "backend/nccl/nccl_library.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <sstream>

namespace khorovod {
namespace {

constexpr const char* kWheelLib = "nvidia/nccl/lib/libnccl.so.2";

void AppendGlob(const std::string& pattern, std::vector<std::string>* out) {
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out->emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
}

std::string Get(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

// Resolves `name` into `*slot`; false when the library lacks it.
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* slot) {
  void* sym = dlsym(handle, name);
  *slot = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

}  // namespace

NcclVersion NcclVersion::FromCode(int code) {
  NcclVersion v;
  if (code < 10000) {  // the pre-2.9 formula: X*1000 + Y*100 + Z
    v.major = code / 1000;
    v.minor = code % 1000 / 100;
    v.patch = code % 100;
  } else {
    v.major = code / 10000;
    v.minor = code % 10000 / 100;
    v.patch = code % 100;
  }
  return v;
}

int NcclVersion::code() const {
  if (major <= 2 && minor <= 8) return major * 1000 + minor * 100 + patch;
  return major * 10000 + minor * 100 + patch;
}

std::string NcclVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

NcclFeatures NcclFeatures::Of(const NcclVersion& version, const NcclSymbols& symbols) {
  const int code = version.code();
  NcclFeatures f;
  f.shrink = symbols.shrink && code >= 22700;
  // The grow root asks the parent communicator for the id it hands out.
  f.grow = symbols.grow && symbols.comm_unique_id && code >= 22900;
  f.revoke = symbols.revoke;
  f.multi_rank_gpu_env = code >= 23000;
  return f;
}

std::string NcclFeatures::str() const {
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  return std::string("shrink=") + yn(shrink) + " revoke=" + yn(revoke) + " grow=" + yn(grow) +
         " multi_rank_gpu=" + yn(multi_rank_gpu_env);
}

std::vector<std::string> NcclSearchOrder(const std::string& override_path,
                                         const std::map<std::string, std::string>& env) {
  if (!override_path.empty()) return {override_path};
  std::vector<std::string> out{"libnccl.so.2"};
  std::stringstream pythonpath(Get(env, "PYTHONPATH"));
  for (std::string dir; std::getline(pythonpath, dir, ':');) {
    if (!dir.empty()) AppendGlob(dir + "/" + kWheelLib, &out);
  }
  if (std::string venv = Get(env, "VIRTUAL_ENV"); !venv.empty()) {
    AppendGlob(venv + "/lib/python3*/site-packages/" + kWheelLib, &out);
  }
  AppendGlob(std::string("/usr/local/lib/python3*/dist-packages/") + kWheelLib, &out);
  AppendGlob(std::string("/usr/local/lib/python3*/site-packages/") + kWheelLib, &out);
  AppendGlob(std::string("/usr/lib/python3/dist-packages/") + kWheelLib, &out);
  return out;
}

StatusOr<std::shared_ptr<const NcclLibrary>> NcclLibrary::Open(const std::string& path) {
  // RTLD_LOCAL: the symbols are reached through dlsym only, so another
  // NCCL in the process (none, normally) cannot be bound by accident.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return Status::FailedPrecondition(err ? err : "dlopen failed");
  }
  // Never dlclose: see the header.
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  lib->path_ = path;
  if (char origin[4096]; dlinfo(handle, RTLD_DI_ORIGIN, origin) == 0) {
    lib->path_ = std::string(origin) + "/" + path.substr(path.rfind('/') + 1);
  }
  std::string missing;
  auto need = [&](const char* name, auto* slot) {
    if (!Resolve(handle, name, slot)) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  need("ncclGetVersion", &lib->GetVersion);
  need("ncclGetErrorString", &lib->GetErrorString);
  need("ncclGetLastError", &lib->GetLastError);
  need("ncclGetUniqueId", &lib->GetUniqueId);
  need("ncclCommInitRankConfig", &lib->CommInitRankConfig);
  need("ncclCommAbort", &lib->CommAbort);
  need("ncclCommGetAsyncError", &lib->CommGetAsyncError);
  need("ncclAllReduce", &lib->AllReduce);
  need("ncclAllGather", &lib->AllGather);
  need("ncclBroadcast", &lib->Broadcast);
  need("ncclSend", &lib->Send);
  need("ncclRecv", &lib->Recv);
  need("ncclGroupStart", &lib->GroupStart);
  need("ncclGroupEnd", &lib->GroupEnd);
  need("ncclRedOpCreatePreMulSum", &lib->RedOpCreatePreMulSum);
  need("ncclRedOpDestroy", &lib->RedOpDestroy);
  if (!missing.empty()) return Status::FailedPrecondition(lib->path_ + " lacks " + missing);
  int code = 0;
  if (ncclResult_t r = lib->GetVersion(&code); r != ncclSuccess) {
    return Status::FailedPrecondition(lib->path_ + ": ncclGetVersion failed (" + std::to_string(r) +
                                      ")");
  }
  lib->version_ = NcclVersion::FromCode(code);
  if (code < kMinNcclVersionCode) {
    return Status::FailedPrecondition(lib->path_ + " is NCCL " + lib->version_.str() +
                                      ", older than 2.27");
  }
  NcclSymbols symbols;
  symbols.shrink = Resolve(handle, "ncclCommShrink", &lib->CommShrink);
  symbols.revoke = Resolve(handle, "ncclCommRevoke", &lib->CommRevoke);
  symbols.grow = Resolve(handle, "ncclCommGrow", &lib->CommGrow);
  symbols.comm_unique_id = Resolve(handle, "ncclCommGetUniqueId", &lib->CommGetUniqueId);
  lib->features_ = NcclFeatures::Of(lib->version_, symbols);
  // A symbol present in a version that does not have the call is not used.
  if (!lib->features_.shrink) lib->CommShrink = nullptr;
  if (!lib->features_.revoke) lib->CommRevoke = nullptr;
  if (!lib->features_.grow) {
    lib->CommGrow = nullptr;
    lib->CommGetUniqueId = nullptr;
  }
  return std::shared_ptr<const NcclLibrary>(std::move(lib));
}

StatusOr<std::shared_ptr<const NcclLibrary>> NcclLibrary::Load(const std::string& override_path) {
  std::map<std::string, std::string> env;
  for (const char* name : {"PYTHONPATH", "VIRTUAL_ENV"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  std::string tried;
  for (const std::string& candidate : NcclSearchOrder(override_path, env)) {
    auto lib = Open(candidate);
    if (lib.ok()) return lib;
    tried += "\n  " + candidate + ": " + lib.status().message();
  }
  if (!override_path.empty()) {
    return Status::FailedPrecondition("KHOROVOD_NCCL_LIBRARY=" + override_path +
                                      " cannot be used:" + tried);
  }
  return Status::FailedPrecondition(
      "no NCCL >= 2.27 found (set KHOROVOD_NCCL_LIBRARY to a libnccl.so.2, or install "
      "nvidia-nccl-cu12/-cu13); "
      "tried:" +
      tried);
}

std::string NcclLibrary::Describe() const {
  return "NCCL " + version_.str() + " from " + path_ + " (" + features_.str() + ")";
}

}  // namespace khorovod
