// The host data-plane backends (gloo, shm) under the whole runtime, across
// real forked processes on this host: every op at sizes from empty to
// several shared-memory chunks, fused and one at a time; and a rank killed
// mid-training surfaces on the survivors as kUnavailable, bounded in time,
// with no shared-memory segment left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "multiproc.h"
#include "tensor_data.h"

namespace khorovod::testing {
namespace {

struct Case {
  std::string backend;
  int ranks;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.backend + "_np" + std::to_string(info.param.ranks);
}

RankOptions OnOneHost(const Case& c) {
  RankOptions opts;
  opts.env["KHOROVOD_CPU_OPERATIONS"] = c.backend;
  opts.env["KHOROVOD_LOCAL_SIZE"] = std::to_string(c.ranks);
  return opts;
}

// Whether this process maps a khorovod shared-memory segment (whose name
// must already be unlinked: the kernel marks it "(deleted)").
bool MapsUnlinkedSegment() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/khorovod-") != std::string::npos &&
        line.find("(deleted)") != std::string::npos)
      return true;
  }
  return false;
}

// Whether a segment named after this process is still in /dev/shm.
bool LeftASegmentName() {
  const std::string prefix = "khorovod-" + std::to_string(getpid()) + "-";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Lengths: empty, one element, not a multiple of any rank count, and more
// than one 2 MiB shared-memory chunk (float64) with a ragged tail.
const int64_t kLengths[] = {0, 1, 7, 1001, 65537, 600001};

class HostBackendTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostBackendTest, AllreduceEveryOpAndLengthFusedAndAlone) {
  const Case c = GetParam();
  KH_RUN_RANKS(
      c.ranks,
      [c](Runtime& rt, const RankContext& ctx) {
        int seed = 0;
        std::vector<std::pair<Tensor, Tensor>> tensors;
        std::vector<std::pair<std::string, ReduceOp>> what;
        std::vector<Handle> handles;
        for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32}) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax}) {
            for (int64_t n : kLengths) {
              tensors.emplace_back(MakeTensor(dt, {n}, op, ctx.rank, ++seed), Tensor(dt, {n}));
              what.emplace_back(std::string(DataTypeName(dt)) + "." +
                                    std::string(ReduceOpName(op)) + "." + std::to_string(n),
                                op);
            }
          }
        }
        for (size_t i = 0; i < tensors.size(); ++i)
          handles.push_back(rt.allreduce_async(what[i].first, tensors[i].first.view(),
                                               tensors[i].second.view(), {what[i].second}));
        for (size_t i = 0; i < tensors.size(); ++i) {
          ASSERT_TRUE(handles[i].wait().ok()) << what[i].first;
          CheckAllreduced(tensors[i].second, what[i].second, ctx.size, static_cast<int>(i + 1),
                          what[i].first);
        }
        // Checked after a collective: rank 0 unlinks the name before its first one.
        EXPECT_EQ(MapsUnlinkedSegment(), c.backend != "gloo") << "auto picks shm for local peers";
        // One at a time, in place: the lone-tensor path.
        for (int64_t n : kLengths) {
          Tensor t = MakeTensor(DataType::kFloat32, {n}, ReduceOp::kSum, ctx.rank, 99);
          ASSERT_TRUE(
              rt.allreduce("alone." + std::to_string(n), t.view(), t.view(), {ReduceOp::kSum})
                  .ok());
          CheckAllreduced(t, ReduceOp::kSum, ctx.size, 99, "alone." + std::to_string(n));
        }
      },
      OnOneHost(c));
}

INSTANTIATE_TEST_SUITE_P(Backends, HostBackendTest,
                         ::testing::Values(Case{"gloo", 2}, Case{"shm", 2}, Case{"shm", 3},
                                           Case{"gloo", 4}, Case{"shm", 4}, Case{"auto", 2}),
                         CaseName);

class HostBackendPeerDeathTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostBackendPeerDeathTest, SurvivorsGetUnavailableAndNoSegmentIsLeft) {
  const Case c = GetParam();
  RankOptions opts = OnOneHost(c);
  opts.env["KHOROVOD_TIMEOUT_SECONDS"] = "5";
  const int victim = c.ranks - 1;
  opts.expect_killed = {victim};
  opts.deadline = std::chrono::seconds(60);
  KH_RUN_RANKS(
      c.ranks,
      [victim](Runtime& rt, const RankContext& ctx) {
        // Several chunks, so the victim may die between two barriers of one call.
        Tensor t = MakeTensor(DataType::kFloat32, {1 << 20}, ReduceOp::kSum, ctx.rank, 1);
        for (int step = 0; step < 3; ++step)
          ASSERT_TRUE(rt.allreduce("step", t.view(), t.view()).ok());
        if (ctx.rank == victim) raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        Status s;
        for (int step = 0; step < 1000 && s.ok(); ++step)
          s = rt.allreduce("step", t.view(), t.view());
        EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
        EXPECT_FALSE(LeftASegmentName());
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Backends, HostBackendPeerDeathTest,
                         ::testing::Values(Case{"gloo", 2}, Case{"shm", 2}, Case{"shm", 4}),
                         CaseName);

}  // namespace
}  // namespace khorovod::testing
