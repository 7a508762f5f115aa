// StagingBackend over a real Gloo context (3 forked ranks on loopback) with
// a DeviceCopier over host memory, so every path runs without a GPU. The
// copier keeps "device" and "host" apart: it checks that each copy stays
// inside a registered device allocation, and counts bytes per direction.
#include "backend/staging/staging_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "backend/registry.h"
#include "bootstrap/gloo_bootstrap.h"
#include "multiproc.h"

namespace khorovod {
namespace {

using testing::RankContext;
using testing::RankOptions;

// "Device" memory: vectors the test registers; a copy touching anything
// else is an error, which catches a staging bug that reads past an input.
class FakeCopier final : public DeviceCopier {
 public:
  struct Counts {
    size_t to_host = 0;
    size_t to_device = 0;
  };
  explicit FakeCopier(Counts* counts) : counts_(counts) {}
  void Register(std::vector<float>* v) { regions_.push_back(v); }

  Device device() const override { return Device{DeviceKind::kCUDA, 0}; }
  Status ToHost(void* host, const void* device, size_t bytes) override {
    KH_RETURN_IF_ERROR(Inside(device, bytes));
    std::memcpy(host, device, bytes);
    counts_->to_host += bytes;
    return Status::Ok();
  }
  Status ToDevice(void* device, const void* host, size_t bytes) override {
    KH_RETURN_IF_ERROR(Inside(device, bytes));
    std::memcpy(device, host, bytes);
    counts_->to_device += bytes;
    return Status::Ok();
  }
  Status Copy(void* dst, const void* src, size_t bytes) override {
    KH_RETURN_IF_ERROR(Inside(dst, bytes));
    KH_RETURN_IF_ERROR(Inside(src, bytes));
    std::memmove(dst, src, bytes);
    return Status::Ok();
  }
  Status Zero(void* device, size_t bytes) override {
    KH_RETURN_IF_ERROR(Inside(device, bytes));
    std::memset(device, 0, bytes);
    return Status::Ok();
  }
  StatusOr<std::shared_ptr<void>> Allocate(size_t) override {
    return Status::InvalidArgument("this fake copier does not allocate");
  }

 private:
  Status Inside(const void* p, size_t bytes) const {
    auto* b = static_cast<const std::byte*>(p);
    for (const auto* v : regions_) {
      auto* begin = reinterpret_cast<const std::byte*>(v->data());
      if (b >= begin && b + bytes <= begin + v->size() * sizeof(float)) return Status::Ok();
    }
    return Status::InvalidArgument("copy of " + std::to_string(bytes) +
                                   " bytes outside device memory");
  }
  std::vector<const std::vector<float>*> regions_;
  Counts* counts_;
};

struct Fixture {
  FakeCopier* copier;
  FakeCopier::Counts counts;
  std::unique_ptr<Backend> backend;
};

std::unique_ptr<Fixture> MakeStaging(const RankContext& ctx) {
  auto f = std::make_unique<Fixture>();
  auto gloo = ConnectGlooContext(ctx.config);
  EXPECT_TRUE(gloo.ok()) << gloo.status();
  if (!gloo.ok()) return nullptr;
  BackendInit init{&ctx.config, *gloo};
  auto host = BackendRegistry::Create("gloo", init);
  EXPECT_TRUE(host.ok()) << host.status();
  if (!host.ok()) return nullptr;
  auto copier = std::make_unique<FakeCopier>(&f->counts);
  f->copier = copier.get();
  f->backend =
      std::make_unique<StagingBackend>(std::move(*host), std::move(copier), ctx.rank, ctx.size);
  return f;
}

RankOptions NoInit() {
  RankOptions o;
  o.init = false;
  o.deadline = std::chrono::seconds(60);
  return o;
}

TEST(StagingBackend, ClaimsOnlyItsDevice) {
  FakeCopier::Counts counts;
  Config config;
  auto gloo = ConnectGlooContext(config);
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  auto host = BackendRegistry::Create("gloo", BackendInit{&config, *gloo});
  ASSERT_TRUE(host.ok());
  StagingBackend b(std::move(*host), std::make_unique<FakeCopier>(&counts), 0, 1);
  EXPECT_TRUE(b.SupportsDevice(Device{DeviceKind::kCUDA, 0}));
  EXPECT_FALSE(b.SupportsDevice(Device{DeviceKind::kCUDA, 1}));
  EXPECT_FALSE(b.SupportsDevice(Device{}));
  EXPECT_FALSE(b.AveragesNatively());
}

TEST(StagingBackend, CollectivesRoundTripThroughHost) {
  KH_RUN_RANKS(
      3,
      [](Runtime&, const RankContext& ctx) {
        auto f = MakeStaging(ctx);
        ASSERT_TRUE(f);
        const float r = static_cast<float>(ctx.rank);

        // Allreduce, out of place: out must receive the sum, in stays intact.
        std::vector<float> in(1000, r + 1), out(1000, -7);
        f->copier->Register(&in);
        f->copier->Register(&out);
        ASSERT_TRUE(
            f->backend
                ->Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum)
                .ok());
        EXPECT_EQ(out, std::vector<float>(1000, 6.0f));
        EXPECT_EQ(in, std::vector<float>(1000, r + 1));

        // Fused spans of different sizes come back each in its own place.
        std::vector<float> a(3, r), b(5000, 2 * r), c(1, 10 + r);
        for (auto* v : {&a, &b, &c}) f->copier->Register(v);
        ASSERT_TRUE(
            f->backend
                ->AllreduceSpans({{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}},
                                 DataType::kFloat32, ReduceOp::kMax)
                .ok());
        EXPECT_EQ(a, std::vector<float>(3, 2.0f));
        EXPECT_EQ(b, std::vector<float>(5000, 4.0f));
        EXPECT_EQ(c, std::vector<float>(1, 12.0f));

        // Allgatherv with unequal shares: rank k contributes k+1 elements.
        std::vector<float> mine(ctx.rank + 1, r), all(6, -1);
        f->copier->Register(&mine);
        f->copier->Register(&all);
        ASSERT_TRUE(
            f->backend->Allgatherv(mine.data(), all.data(), {1, 2, 3}, DataType::kFloat32).ok());
        EXPECT_EQ(all, (std::vector<float>{0, 1, 1, 2, 2, 2}));

        // Broadcast from rank 1.
        std::vector<float> bc(4, r);
        f->copier->Register(&bc);
        ASSERT_TRUE(f->backend->Broadcast(bc.data(), bc.size(), DataType::kFloat32, 1).ok());
        EXPECT_EQ(bc, std::vector<float>(4, 1.0f));

        // Alltoallv: rank s sends s+1 copies of (10*s + d) to rank d.
        std::vector<int64_t> send(3, ctx.rank + 1), recv{1, 2, 3};
        std::vector<float> sbuf, rbuf(6, -1);
        for (int d = 0; d < 3; ++d) sbuf.insert(sbuf.end(), ctx.rank + 1, 10.0f * r + d);
        f->copier->Register(&sbuf);
        f->copier->Register(&rbuf);
        ASSERT_TRUE(
            f->backend->Alltoallv(sbuf.data(), send, rbuf.data(), recv, DataType::kFloat32).ok());
        std::vector<float> expected;
        for (int s = 0; s < 3; ++s) expected.insert(expected.end(), s + 1, 10.0f * s + r);
        EXPECT_EQ(rbuf, expected);

        ASSERT_TRUE(f->backend->Barrier().ok());

        // Bytes staged: the broadcast root copies out only, the others copy in
        // only; every other collective copies its whole input out and result in.
        const size_t to_host =
            (1000 + 5004 + ctx.rank + 1 + (ctx.rank == 1 ? 4 : 0) + 3 * (ctx.rank + 1)) * 4;
        const size_t to_device = (1000 + 5004 + 6 + (ctx.rank == 1 ? 0 : 4) + 6) * 4;
        EXPECT_EQ(f->counts.to_host, to_host);
        EXPECT_EQ(f->counts.to_device, to_device);
      },
      NoInit());
}

TEST(StagingBackend, CopyFailureIsReturnedNotHidden) {
  KH_RUN_RANKS(
      2,
      [](Runtime&, const RankContext& ctx) {
        auto f = MakeStaging(ctx);
        ASSERT_TRUE(f);
        // Nothing registered: the copier refuses, and the error must surface
        // before the host collective runs (the other rank fails the same way,
        // so neither waits for the other).
        std::vector<float> v(8, 1);
        Status s =
            f->backend->Allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
        EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
        // The backend still works, and neither rank exits (closing its
        // connections) while the other may still be connecting.
        EXPECT_TRUE(f->backend->Barrier().ok());
      },
      NoInit());
}

}  // namespace
}  // namespace khorovod
