#include "core/process_set_comm.h"

#include <gloo/context.h>
#include <gloo/transport/address.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <cstring>

#include "backend/registry.h"
#include "core/process_set_table.h"

namespace khorovod {
namespace {

// One address slot: its length, then the bytes, padded to whole words.
constexpr size_t kAddressWords = 1 + (gloo::transport::Address::kMaxByteSize + 7) / 8;

// A gloo::Context whose pairs are connected to addresses obtained by the
// caller (gloo's own full-mesh connection needs a key-value store).
class MemberContext final : public gloo::Context {
 public:
  MemberContext(int rank, int size, const std::shared_ptr<gloo::transport::Device>& device,
                std::chrono::milliseconds timeout)
      : gloo::Context(rank, size) {
    device_ = device;
    setTimeout(timeout);
    transportContext_ = device->createContext(rank, size);
    transportContext_->setTimeout(timeout);
    for (int i = 0; i < size; ++i) {
      if (i != rank) transportContext_->createPair(i);
    }
  }

  std::vector<char> AddressFor(int peer) {
    return transportContext_->getPair(peer)->address().bytes();
  }
  void Connect(int peer, const std::vector<char>& address) {
    transportContext_->getPair(peer)->connect(address);
  }
};

}  // namespace

StatusOr<std::unique_ptr<ProcessSetComm>> ConnectProcessSet(const std::vector<int>& members,
                                                            const ProcessSetCommInit& init) {
  const int set_size = static_cast<int>(members.size());
  const int set_rank = IndexIn(members, init.config->rank);
  const size_t block = static_cast<size_t>(set_size) * kAddressWords;
  try {
    std::shared_ptr<MemberContext> context;
    std::vector<uint64_t> mine(block, 0);
    if (set_rank >= 0) {
      context = std::make_shared<MemberContext>(set_rank, set_size, init.job_context->getDevice(),
                                                init.job_context->getTimeout());
      for (int peer = 0; peer < set_size; ++peer) {
        if (peer == set_rank) continue;
        const std::vector<char> bytes = context->AddressFor(peer);
        if (bytes.size() > gloo::transport::Address::kMaxByteSize) {
          return Status::Internal("gloo pair address of " + std::to_string(bytes.size()) +
                                  " bytes");
        }
        uint64_t* slot = mine.data() + static_cast<size_t>(peer) * kAddressWords;
        slot[0] = bytes.size();
        std::memcpy(slot + 1, bytes.data(), bytes.size());
      }
    }
    std::vector<uint64_t> all;
    KH_RETURN_IF_ERROR(init.channel->AllgatherWords(mine, &all));
    if (set_rank < 0) return std::unique_ptr<ProcessSetComm>();
    // Member j's slot for this rank holds the address of j's pair to it.
    for (int peer = 0; peer < set_size; ++peer) {
      if (peer == set_rank) continue;
      const uint64_t* slot = all.data() + static_cast<size_t>(members[peer]) * block +
                             static_cast<size_t>(set_rank) * kAddressWords;
      if (slot[0] == 0 || slot[0] > gloo::transport::Address::kMaxByteSize) {
        return Status::Internal("process set exchange: no address from rank " +
                                std::to_string(members[peer]));
      }
      std::vector<char> address(slot[0]);
      std::memcpy(address.data(), slot + 1, address.size());
      context->Connect(peer, address);
    }
    auto comm = std::make_unique<ProcessSetComm>();
    comm->context = context;
    BackendInit backend_init{init.config, comm->context};
    auto backend = BackendRegistry::Create("gloo", backend_init);
    if (!backend.ok()) return backend.status();
    comm->backend = std::move(*backend);
    comm->executor = std::make_unique<Executor>(
        Placement{.rank = set_rank, .size = set_size}, init.config->fusion_threshold_bytes,
        comm->backend.get(), nullptr, init.queue, init.metrics, init.timeline);
    return comm;
  } catch (const std::exception& e) {
    return Status::Unavailable("could not connect process set " + RankListString(members) + ": " +
                               e.what());
  }
}

ProcessSetComms::ProcessSetComms(ProcessSetCommInit init, std::shared_ptr<ProcessSetTable> table)
    : init_(init), table_(std::move(table)) {}

Status ProcessSetComms::Execute(const std::vector<Response>& responses, Executor& global,
                                Negotiator& negotiator) {
  const bool only_global = std::all_of(responses.begin(), responses.end(), [](const Response& r) {
    return r.process_set == 0 && r.op != OpType::kProcessSet;
  });
  if (only_global) return global.Execute(responses, negotiator);
  std::vector<Response> in_global;
  std::vector<const Response*> changes;
  std::map<int, std::vector<Response>> by_set;
  for (const Response& r : responses) {
    if (r.op == OpType::kProcessSet) {
      changes.push_back(&r);
    } else {
      (r.process_set == 0 ? in_global : by_set[r.process_set]).push_back(r);
    }
  }
  KH_RETURN_IF_ERROR(global.Execute(in_global, negotiator));
  for (const Response* r : changes) {
    if (!r->members.empty()) KH_RETURN_IF_ERROR(Add(*r, negotiator));
  }
  for (const auto& [id, list] : by_set) {
    auto comm = comms_.find(id);
    if (comm != comms_.end()) KH_RETURN_IF_ERROR(comm->second->executor->Execute(list, negotiator));
  }
  for (const Response* r : changes) {
    if (r->members.empty()) Remove(*r, negotiator);
  }
  return Status::Ok();
}

// The set's id reaches add_process_set through the completion's integer
// result (the one join uses for the last rank).
Status ProcessSetComms::Add(const Response& r, Negotiator& negotiator) {
  const std::vector<int> members(r.members.begin(), r.members.end());
  auto comm = ConnectProcessSet(members, init_);
  if (!comm.ok()) return comm.status();
  if (*comm) comms_[r.process_set] = std::move(*comm);
  table_->Add(r.process_set, members);
  if (auto op = negotiator.Take(r.names.front())) {
    op->completion->SetJoinLastRank(r.process_set);
    init_.queue->Complete(*op, Status::Ok());
  }
  return Status::Ok();
}

void ProcessSetComms::Remove(const Response& r, Negotiator& negotiator) {
  comms_.erase(r.process_set);
  table_->Remove(r.process_set);
  if (auto op = negotiator.Take(r.names.front())) init_.queue->Complete(*op, Status::Ok());
}

}  // namespace khorovod
