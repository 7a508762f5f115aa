#include "bootstrap/gloo_bootstrap.h"
#include "bootstrap/rendezvous.h"

namespace khorovod {
namespace {

class StaticRendezvous final : public Rendezvous {
 public:
  StatusOr<Assignment> NextGeneration(int64_t previous) override {
    if (previous >= 0) {
      return Status::FailedPrecondition(
          "this job has a fixed membership (no rendezvous server), so it cannot re-form; "
          "start it with khorovodrun --min-np/--max-np for elastic training");
    }
    return Assignment{};  // filled from the Config by Connect's caller
  }

  StatusOr<std::shared_ptr<gloo::Context>> Connect(const Assignment&,
                                                   const Config& config) override {
    return ConnectGlooContext(config);
  }

  bool MembershipChanged() const override { return false; }
  void ReportFailure(int64_t, const std::string&) override {}
  void Leave(bool) override {}
  bool elastic() const override { return false; }
};

}  // namespace

std::unique_ptr<Rendezvous> MakeStaticRendezvous() { return std::make_unique<StaticRendezvous>(); }

}  // namespace khorovod
