#include "backend/nccl/nccl_formation.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_status.h"
#include "backend/gloo/gloo_ops.h"

namespace khorovod {
namespace {

// One rank's record in the formation allgather. POD, fixed size.
struct FormationRecord {
  ReformMember member;
  char machine[48];  // the kernel's boot id (shared by a node's containers), else the hostname
  char host[64];     // the hostname, for messages
  char bus_id[32];   // the GPU's PCI bus id
};

void CopyString(const std::string& s, char* out, size_t n) {
  std::memset(out, 0, n);
  std::memcpy(out, s.data(), std::min(s.size(), n - 1));
}

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string MachineKey() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  return Hostname();
}

StatusOr<FormationRecord> OwnRecord(const NcclLibrary& lib, const NcclLegacy* legacy, int device) {
  FormationRecord rec{};
  if (legacy && legacy->comm && legacy->comm->alive()) {
    rec.member.comm_id = legacy->comm_id;
    rec.member.old_rank = legacy->rank;
    rec.member.old_size = legacy->size;
    rec.member.broken = legacy->comm->broken() ? 1 : 0;
    rec.member.revoke = legacy->comm->revoked() ? 1 : 0;
  }
  rec.member.shrink = lib.features().shrink ? 1 : 0;
  rec.member.grow = lib.features().grow ? 1 : 0;
  if (!rec.member.broken) rec.member.revoke = 1;  // nothing to revoke: counts as done
  CopyString(MachineKey(), rec.machine, sizeof rec.machine);
  CopyString(Hostname(), rec.host, sizeof rec.host);
  char bus[32] = {};
  KH_CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  CopyString(bus, rec.bus_id, sizeof rec.bus_id);
  return rec;
}

void SetIfUnset(const char* name, const std::string& value) {
  if (std::getenv(name) == nullptr) setenv(name, value.c_str(), 0);
}

// Refuses two ranks on one GPU unless opted in; opted in, makes NCCL accept it.
Status CheckSharedGpus(const Config& config, const NcclLibrary& lib,
                       const std::vector<FormationRecord>& all) {
  std::string shared;
  bool one_machine = true;
  for (size_t a = 0; a < all.size(); ++a) {
    one_machine = one_machine && std::strcmp(all[a].machine, all[0].machine) == 0;
    for (size_t b = a + 1; b < all.size() && shared.empty(); ++b) {
      if (std::strcmp(all[a].machine, all[b].machine) == 0 &&
          std::strcmp(all[a].bus_id, all[b].bus_id) == 0) {
        shared = "ranks " + std::to_string(a) + " and " + std::to_string(b) + " both use GPU " +
                 all[a].bus_id + " on " + all[a].host;
      }
    }
  }
  if (shared.empty()) return Status::Ok();
  if (!config.gpu_share) {
    return Status::FailedPrecondition(
        shared +
        ": NCCL runs one rank per GPU. Give each rank its own GPU (KHOROVOD_GPU_DEVICE, "
        "CUDA_VISIBLE_DEVICES, one GPU per pod), use KHOROVOD_GPU_OPERATIONS=staging, or, for "
        "tests and "
        "benchmarks only, set KHOROVOD_GPU_SHARE=1");
  }
  if (lib.features().multi_rank_gpu_env) {
    SetIfUnset("NCCL_MULTI_RANK_GPU_ENABLE", "1");
  } else {
    SetIfUnset("NCCL_HOSTID",
               std::string(all[config.rank].host) + "-khorovod-pid" + std::to_string(getpid()));
    if (one_machine) SetIfUnset("NCCL_SOCKET_IFNAME", "lo");
  }
  return Status::Ok();
}

uint64_t HashId(const ncclUniqueId& id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

StatusOr<NcclFormed> InitFresh(const BackendInit& init, std::shared_ptr<const NcclLibrary> lib,
                               const cuda::CudaStream& stream) {
  const Config& config = *init.config;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (config.rank == 0) {
    if (ncclResult_t r = lib->GetUniqueId(&id); r != ncclSuccess) {
      return Status::Unavailable(std::string("ncclGetUniqueId: ") + lib->GetErrorString(r));
    }
  }
  if (config.size > 1)
    KH_RETURN_IF_ERROR(gloo_ops::BroadcastBytes(init.gloo_context, &id, sizeof id, 0));
  auto comm = NcclComm::Create(std::move(lib), id, config.rank, config.size, stream,
                               config.transport_timeout);
  if (!comm.ok()) return comm.status();
  NcclFormed out;
  out.comm = std::move(*comm);
  out.comm_id = HashId(id);
  return out;
}

// Grows `parent` (null on a newcomer) to the session's size; rank 0, a
// survivor, hands NCCL's grow id to the newcomers over Gloo.
StatusOr<std::unique_ptr<NcclComm>> GrowTo(const BackendInit& init,
                                           std::shared_ptr<const NcclLibrary> lib, NcclComm* parent,
                                           const cuda::CudaStream& stream) {
  const Config& config = *init.config;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  Status got = Status::Ok();
  if (config.rank == 0) {
    auto made = parent->GrowId();
    if (made.ok()) id = *made;
    got = made.status();
  }
  // Always broadcast, so that a failed root does not leave the others waiting.
  KH_RETURN_IF_ERROR(gloo_ops::BroadcastBytes(init.gloo_context, &id, sizeof id, 0));
  KH_RETURN_IF_ERROR(got);
  const bool root = config.rank == 0;
  return NcclComm::Grow(std::move(lib), parent, parent && !root ? nullptr : &id, config.rank,
                        config.size, stream, config.transport_timeout);
}

StatusOr<NcclFormed> Execute(const BackendInit& init, std::shared_ptr<const NcclLibrary> lib,
                             const cuda::CudaStream& stream, NcclLegacy* legacy,
                             const ReformPlan& plan) {
  const Config& config = *init.config;
  const bool survivor = config.rank < plan.survivors;
  NcclFormed out;
  out.plan = plan;
  out.comm_id = NextCommId(plan.comm_id, plan.path, config.size);
  if (plan.path == ReformPath::kReuse) {
    out.comm = std::move(legacy->comm);
    out.comm_id = plan.comm_id;
    return out;
  }
  std::unique_ptr<NcclComm> shrunk;
  if ((plan.path == ReformPath::kShrink || plan.path == ReformPath::kShrinkGrow) && survivor) {
    auto s = NcclComm::Shrink(*legacy->comm, plan.exclude, plan.abort_parent);
    if (!s.ok()) return s.status();
    shrunk = std::move(*s);
  }
  if (plan.path == ReformPath::kShrink) {
    out.comm = std::move(shrunk);
    return out;
  }
  NcclComm* parent = survivor ? (shrunk ? shrunk.get() : legacy->comm.get()) : nullptr;
  auto grown = GrowTo(init, std::move(lib), parent, stream);
  if (!grown.ok()) return grown.status();
  out.comm = std::move(*grown);
  return out;
}

}  // namespace

StatusOr<NcclFormed> FormNcclComm(const BackendInit& init, std::shared_ptr<const NcclLibrary> lib,
                                  const cuda::CudaStream& stream) {
  const Config& config = *init.config;
  // Whatever this creation does not take over is aborted when it returns.
  std::shared_ptr<NcclLegacy> legacy = std::dynamic_pointer_cast<NcclLegacy>(init.legacy);
  auto own = OwnRecord(*lib, legacy.get(), stream.device());
  if (!own.ok()) return own.status();
  std::vector<FormationRecord> all(config.size);
  if (config.size > 1) {
    std::vector<size_t> bytes(config.size, sizeof(FormationRecord));
    KH_RETURN_IF_ERROR(gloo_ops::AllgathervBytes(init.gloo_context, &*own, all.data(), bytes));
  } else {
    all[0] = *own;
  }
  KH_RETURN_IF_ERROR(CheckSharedGpus(config, *lib, all));
  std::vector<ReformMember> members;
  for (const FormationRecord& r : all) members.push_back(r.member);
  const ReformPlan plan = PlanReform(members);
  StatusOr<NcclFormed> formed = Status::Internal("unset");
  if (plan.path == ReformPath::kInit) {
    if (legacy) legacy->comm.reset();  // abort the old communicator before forming anew
    formed = InitFresh(init, lib, stream);
    if (formed.ok()) formed->plan = plan;
  } else {
    formed = Execute(init, lib, stream, legacy.get(), plan);
  }
  if (formed.ok() && config.rank == 0) {
    std::fprintf(stderr, "khorovod: nccl: %s (%s) at %d ranks; %s\n", ReformPathName(plan.path),
                 plan.why.c_str(), config.size, lib->Describe().c_str());
  }
  return formed;
}

}  // namespace khorovod
