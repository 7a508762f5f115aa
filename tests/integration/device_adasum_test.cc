// op=Adasum on device tensors (runtime core/device_adasum.h) over emulated
// device memory, with simulated hosts: Horovod's NCCL result, Adasum across
// hosts of the hosts' sums divided by the ranks per host. The expectations
// are computed by hand or from properties of Adasum, not by the code under
// test: orthogonal vectors add up, equal vectors stay themselves, one pair
// has a hand-worked answer. Refusals: hosts holding different numbers of
// ranks, a number of hosts that is not a power of two.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "emulated_device.h"
#include "multiproc.h"

namespace khorovod::testing {
namespace {

struct Layout {
  int hosts;
  int per_host;
};

// World rank r sits on host hosts_of[r].
RankOptions OnDevices(std::vector<int> hosts_of) {
  RankOptions o;
  o.env["KHOROVOD_GPU_OPERATIONS"] = "emulated";
  o.rank_env = [hosts_of](int r, std::map<std::string, std::string>& env) {
    const int host = hosts_of[r];
    const int hosts = *std::max_element(hosts_of.begin(), hosts_of.end()) + 1;
    const auto local = std::count(hosts_of.begin(), hosts_of.begin() + r, host);
    const auto local_size = std::count(hosts_of.begin(), hosts_of.end(), host);
    env["KHOROVOD_LOCAL_RANK"] = std::to_string(local);
    env["KHOROVOD_LOCAL_SIZE"] = std::to_string(local_size);
    env["KHOROVOD_CROSS_RANK"] = std::to_string(host);
    env["KHOROVOD_CROSS_SIZE"] = std::to_string(hosts);
  };
  return o;
}

RankOptions OnLayout(Layout l) {
  std::vector<int> hosts_of;
  for (int r = 0; r < l.hosts * l.per_host; ++r) hosts_of.push_back(r / l.per_host);
  return OnDevices(hosts_of);
}

// The emulated backend pins cuda:<local rank>.
Device MyDevice(Runtime& rt) { return Device{DeviceKind::kCUDA, rt.local_rank()}; }

// Runs one Adasum allreduce of `values` on this rank's device.
StatusOr<std::vector<double>> Adasum(Runtime& rt, const std::string& name,
                                     const std::vector<double>& values) {
  Tensor host(DataType::kFloat64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), host.data_as<double>());
  DeviceTensor in = DeviceTensor::From(host, MyDevice(rt));
  DeviceTensor out = DeviceTensor::From(Tensor(DataType::kFloat64, host.shape), MyDevice(rt));
  Status s = rt.allreduce_async(name, in.view(), out.view(), {ReduceOp::kAdasum}).wait();
  if (!s.ok()) return s;
  const Tensor& result = out.Download();
  return std::vector<double>(result.data_as<double>(), result.data_as<double>() + values.size());
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12) << what << " [" << i << "]";
}

class DeviceAdasumTest : public ::testing::TestWithParam<Layout> {};

// Disjoint supports make every partial sum orthogonal to every other, and
// Adasum of orthogonal vectors is their sum: the total over all ranks,
// divided by the ranks per host.
TEST_P(DeviceAdasumTest, OrthogonalVectorsAddUpDividedByRanksPerHost) {
  const Layout l = GetParam();
  KH_RUN_RANKS(
      l.hosts * l.per_host,
      [l](Runtime& rt, const RankContext& ctx) {
        const size_t n = static_cast<size_t>(2 * ctx.size);
        std::vector<double> mine(n, 0.0), want(n, 0.0);
        for (int r = 0; r < ctx.size; ++r) {
          want[r] = (r + 1.0) / l.per_host;
          want[r + ctx.size] = -2.0 * (r + 1.0) / l.per_host;
        }
        mine[ctx.rank] = ctx.rank + 1.0;
        mine[ctx.rank + ctx.size] = -2.0 * (ctx.rank + 1.0);
        auto got = Adasum(rt, "orthogonal", mine);
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectNear(*got, want, "orthogonal");
      },
      OnLayout(l));
}

// Every rank holds v: each host sums to per_host * v, Adasum of equal
// vectors is that vector, and the division gives v back.
TEST_P(DeviceAdasumTest, EqualVectorsComeBackUnchanged) {
  const Layout l = GetParam();
  KH_RUN_RANKS(
      l.hosts * l.per_host,
      [](Runtime& rt, const RankContext&) {
        const std::vector<double> v = {0.5, -3.0, 7.25, 1e-3, 0.0};
        auto got = Adasum(rt, "equal", v);
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectNear(*got, v, "equal");
      },
      OnLayout(l));
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeviceAdasumTest,
                         ::testing::Values(Layout{1, 2}, Layout{2, 1}, Layout{2, 2}, Layout{4, 1},
                                           Layout{1, 3}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::to_string(info.param.hosts) + "x" +
                                  std::to_string(info.param.per_host);
                         });

// Two hosts of two ranks. Host 0 sums to a = (1, 0), host 1 to b = (1, 1):
// a.b = 1, |a|^2 = 1, |b|^2 = 2, so Adasum is (1 - 1/2) a + (1 - 1/4) b =
// (1.25, 0.75), and divided by 2 ranks per host (0.625, 0.375). Prescale
// and postscale apply before and after, as on the host.
TEST(DeviceAdasum, APairWorkedByHandWithScaling) {
  KH_RUN_RANKS(
      4,
      [](Runtime& rt, const RankContext& ctx) {
        const std::vector<std::vector<double>> inputs = {{0.25, 0}, {0.75, 0}, {1, 0.5}, {0, 0.5}};
        auto got = Adasum(rt, "pair", inputs[ctx.rank]);
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectNear(*got, {0.625, 0.375}, "pair");

        Tensor host(DataType::kFloat64, {2});
        for (int i = 0; i < 2; ++i) host.data_as<double>()[i] = inputs[ctx.rank][i] / 4;
        DeviceTensor in = DeviceTensor::From(host, MyDevice(rt));
        DeviceTensor out = DeviceTensor::From(Tensor(DataType::kFloat64, {2}), MyDevice(rt));
        AllreduceOptions opts{ReduceOp::kAdasum};
        opts.prescale_factor = 4.0;
        opts.postscale_factor = 10.0;
        ASSERT_TRUE(rt.allreduce_async("scaled", in.view(), out.view(), opts).wait().ok());
        const Tensor& r = out.Download();
        EXPECT_NEAR(r.data_as<double>()[0], 6.25, 1e-12);
        EXPECT_NEAR(r.data_as<double>()[1], 3.75, 1e-12);
      },
      OnLayout({2, 2}));
}

// Refusals reach every rank alike, and the device backend stays usable: a
// plain allreduce after them still runs.
void ExpectRefusedThenUsable(Runtime& rt, const std::string& message) {
  auto got = Adasum(rt, "refused", {1.0, 2.0});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status();
  EXPECT_NE(got.status().message().find(message), std::string::npos) << got.status();
  DeviceTensor in = DeviceTensor::From(Tensor(DataType::kFloat64, {1}), MyDevice(rt));
  DeviceTensor out = DeviceTensor::From(Tensor(DataType::kFloat64, {1}), MyDevice(rt));
  EXPECT_TRUE(rt.allreduce_async("after", in.view(), out.view(), {ReduceOp::kSum}).wait().ok());
}

TEST(DeviceAdasum, HostsWithDifferentRankCountsAreRefused) {
  KH_RUN_RANKS(
      3, [](Runtime& rt, const RankContext&) { ExpectRefusedThenUsable(rt, "heterogeneous"); },
      OnDevices({0, 0, 1}));
}

TEST(DeviceAdasum, ThreeHostsAreRefused) {
  KH_RUN_RANKS(
      3,
      [](Runtime& rt, const RankContext&) { ExpectRefusedThenUsable(rt, "non-power of 2 nodes"); },
      OnLayout({3, 1}));
}

}  // namespace
}  // namespace khorovod::testing
