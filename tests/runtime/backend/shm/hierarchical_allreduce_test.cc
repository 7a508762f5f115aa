// The shm backend's hierarchical allreduce under the whole runtime, across
// real forked processes placed on simulated hosts (each rank is given its
// host and local rank, as a launcher on several machines would): every
// dtype at lengths around the shared-memory chunk and the leaders-only
// bound; bit-identical results on every rank for sums whose order matters; uneven layouts fall back
// to Gloo (no segment); and a rank SIGKILLed on another host surfaces on the survivors as
// kUnavailable within a bound.
#include "backend/shm/hierarchical_allreduce.h"

#include <gloo/context.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/shm/path_trial.h"
#include "bootstrap/gloo_bootstrap.h"
#include "multiproc.h"
#include "tensor_data.h"

namespace khorovod::testing {
namespace {

struct Layout {
  int hosts;
  int per_host;
  bool interleaved;  // rank r on host r % hosts (else host-major: r / per_host)
};

// Names the parameter in test listings (ctest's names include it; the
// default, the struct's bytes, would show its uninitialized padding).
void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.hosts << "x" << l.per_host << (l.interleaved ? " interleaved" : "");
}

std::string LayoutName(const ::testing::TestParamInfo<Layout>& info) {
  return std::to_string(info.param.hosts) + "x" + std::to_string(info.param.per_host) +
         (info.param.interleaved ? "_interleaved" : "");
}

// Placement of world rank r on layout `l`.
void Place(const Layout& l, int r, std::map<std::string, std::string>& env) {
  const int host = l.interleaved ? r % l.hosts : r / l.per_host;
  const int local = l.interleaved ? r / l.hosts : r % l.per_host;
  env["KHOROVOD_LOCAL_RANK"] = std::to_string(local);
  env["KHOROVOD_LOCAL_SIZE"] = std::to_string(l.per_host);
  env["KHOROVOD_CROSS_RANK"] = std::to_string(host);
  env["KHOROVOD_CROSS_SIZE"] = std::to_string(l.hosts);
}

RankOptions OnHosts(const Layout& l, const std::string& backend) {
  RankOptions opts;
  opts.env["KHOROVOD_CPU_OPERATIONS"] = backend;
  opts.rank_env = [l](int r, std::map<std::string, std::string>& env) { Place(l, r, env); };
  opts.deadline = std::chrono::seconds(150);
  return opts;
}

// Khorovod shared-memory segments this process maps.
int MappedSegments() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/khorovod-") != std::string::npos) ++n;
  }
  return n;
}

// Elements per shared-memory chunk of `dtype`.
int64_t ChunkElems(DataType dtype) {
  return static_cast<int64_t>(shm::HierarchicalAllreduce::kSlotBytes / DataTypeSize(dtype));
}

// Elements of the largest chunk that only the hosts' leaders reduce.
int64_t LeaderOnlyElems(DataType dtype) {
  return static_cast<int64_t>(shm::HierarchicalAllreduce::kLeaderOnlyBytes / DataTypeSize(dtype));
}

// Lengths on both sides of one and two chunks and of the leaders-only
// bound, and short ones (fewer elements than ranks per host: some local
// ranks own nothing).
std::vector<int64_t> Lengths(DataType dtype) {
  const int64_t c = ChunkElems(dtype), lead = LeaderOnlyElems(dtype);
  return {1, 2, 7, lead, lead + 1, c - 1, c, c + 1, 2 * c + 3};
}

uint64_t Fnv1a(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i)
    h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  return h;
}

// Bools: sum and max are a logical or of the ranks' (TestValue != 0), which
// the arithmetic reference does not model.
void CheckLogicalOr(const Tensor& out, ReduceOp op, int size, int seed, const std::string& what) {
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    bool any = false;
    for (int r = 0; r < size; ++r) any = any || TestValue(DataType::kBool, op, r, i, seed) != 0;
    ASSERT_EQ(static_cast<const bool*>(out.data())[i], any) << what << " element " << i;
  }
}

class HierarchicalAllreduceTest : public ::testing::TestWithParam<Layout> {};

TEST_P(HierarchicalAllreduceTest, EveryDtypeAroundChunkBoundaries) {
  const Layout l = GetParam();
  KH_RUN_RANKS(
      l.hosts * l.per_host,
      [](Runtime& rt, const RankContext& ctx) {
        std::vector<DataType> dtypes;
        for (DataType dt : kAllDataTypes) dtypes.push_back(dt);
        for (DataType dt : kHostOnlyDataTypes) dtypes.push_back(dt);
        int seed = 0;
        // Every tensor of one (dtype, op) at once, so they fuse as in training.
        auto check = [&](DataType dt, ReduceOp op, const std::vector<int64_t>& lengths) {
          std::vector<std::pair<Tensor, Tensor>> tensors;
          std::vector<Handle> handles;
          std::vector<std::string> names;
          for (int64_t n : lengths) {
            names.push_back(std::string(DataTypeName(dt)) + "." + std::string(ReduceOpName(op)) +
                            "." + std::to_string(n));
            tensors.emplace_back(MakeTensor(dt, {n}, op, ctx.rank, ++seed), Tensor(dt, {n}));
          }
          for (size_t i = 0; i < tensors.size(); ++i)
            handles.push_back(rt.allreduce_async(names[i], tensors[i].first.view(),
                                                 tensors[i].second.view(), {op}));
          for (size_t i = 0; i < tensors.size(); ++i) {
            ASSERT_TRUE(handles[i].wait().ok()) << names[i];
            const int tensor_seed = seed - static_cast<int>(tensors.size() - 1 - i);
            if (dt == DataType::kBool) {
              CheckLogicalOr(tensors[i].second, op, ctx.size, tensor_seed, names[i]);
            } else {
              CheckAllreduced(tensors[i].second, op, ctx.size, tensor_seed, names[i]);
            }
          }
        };
        for (DataType dt : dtypes) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) check(dt, op, Lengths(dt));
        }
        // The other reductions (average: the runtime divides the sum).
        for (DataType dt : {DataType::kFloat32, DataType::kFloat16, DataType::kInt32}) {
          for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kAverage, ReduceOp::kProduct})
            check(dt, op, {7, ChunkElems(dt) + 1});
        }
        // Two segments per simulated host, and this rank maps its host's:
        // the data plane's and the negotiation's (shm/host_leader_channel.h).
        EXPECT_EQ(MappedSegments(), 2);
      },
      OnHosts(l, "shm"));
}

// Random floats (sums not exact, so reduction order shows in the bits):
// every rank of the world must hold the very same bytes.
TEST_P(HierarchicalAllreduceTest, ResultsAreBitIdenticalOnEveryRank) {
  const Layout l = GetParam();
  KH_RUN_RANKS(
      l.hosts * l.per_host,
      [](Runtime& rt, const RankContext& ctx) {
        // Split chunks and a last one the leaders reduce alone, then one
        // only the leaders reduce.
        for (const int64_t n :
             {2 * ChunkElems(DataType::kFloat32) + 5, LeaderOnlyElems(DataType::kFloat32) - 3}) {
          const std::string name = "random." + std::to_string(n);
          Tensor t(DataType::kFloat32, {n});
          std::mt19937 gen(static_cast<uint32_t>(1234 + ctx.rank));
          std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
          for (int64_t i = 0; i < n; ++i) static_cast<float*>(t.data())[i] = dist(gen) * 1e3f;
          ASSERT_TRUE(rt.allreduce(name, t.view(), t.view(), {ReduceOp::kSum}).ok());
          Tensor hash(DataType::kInt64, {1});
          const uint64_t h = Fnv1a(t.data(), static_cast<size_t>(n) * sizeof(float));
          std::memcpy(hash.data(), &h, sizeof h);
          Tensor all;
          ASSERT_TRUE(rt.allgather(name + ".hashes", hash.view(), &all).ok());
          for (int r = 0; r < ctx.size; ++r)
            EXPECT_EQ(static_cast<const int64_t*>(all.data())[r], static_cast<int64_t>(h))
                << name << " rank " << r;
        }
      },
      OnHosts(l, "auto"));
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalAllreduceTest,
                         ::testing::Values(Layout{2, 2, false}, Layout{3, 2, true},
                                           Layout{2, 3, false}),
                         LayoutName);

// Large allreduces across hosts go to the shm backend's trial
// (backend/shm/path_trial.h): the first ones alternate the flat ring and
// the hierarchical path, the world's summed timings pick one, and the rest
// take it. Every result must be right, before and after the verdict, and
// every rank must take the same path each time (a rank on the other path
// would never meet its peers, and the test would run past its deadline).
TEST(HierarchicalAllreduceTrial, LargeAllreducesAreRightBeforeAndAfterTheVerdict) {
  KH_RUN_RANKS(
      4,
      [](Runtime& rt, const RankContext& ctx) {
        const int64_t n =
            static_cast<int64_t>(shm::HierarchicalAllreduce::kBandwidthBoundBytes / sizeof(float)) +
            3;
        for (int i = 0; i < shm::PathTrial::kWarmups + shm::PathTrial::kTrials + 4; ++i) {
          const std::string name = "large." + std::to_string(i);
          Tensor t = MakeTensor(DataType::kFloat32, {n}, ReduceOp::kSum, ctx.rank, i);
          ASSERT_TRUE(rt.allreduce(name, t.view(), t.view(), {ReduceOp::kSum}).ok()) << name;
          CheckAllreduced(t, ReduceOp::kSum, ctx.size, i, name);
        }
      },
      OnHosts(Layout{2, 2, false}, "shm"));
}

// Host 0 runs two ranks, host 1 one: no hierarchy (and no segment), yet
// auto and shm both give correct results through Gloo.
TEST(HierarchicalAllreduceFallback, UnevenHostsUseGloo) {
  for (const std::string backend : {"auto", "shm"}) {
    RankOptions opts;
    opts.env["KHOROVOD_CPU_OPERATIONS"] = backend;
    opts.rank_env = [](int r, std::map<std::string, std::string>& env) {
      env["KHOROVOD_LOCAL_RANK"] = std::to_string(r < 2 ? r : 0);
      env["KHOROVOD_LOCAL_SIZE"] = r < 2 ? "2" : "1";
      env["KHOROVOD_CROSS_RANK"] = r < 2 ? "0" : "1";
      env["KHOROVOD_CROSS_SIZE"] = "2";
    };
    KH_RUN_RANKS(
        3,
        [](Runtime& rt, const RankContext& ctx) {
          for (int64_t n : {int64_t{7}, 3 * ChunkElems(DataType::kFloat32) + 1}) {
            Tensor t = MakeTensor(DataType::kFloat32, {n}, ReduceOp::kSum, ctx.rank, 5);
            ASSERT_TRUE(rt.allreduce("uneven", t.view(), t.view(), {ReduceOp::kSum}).ok());
            CheckAllreduced(t, ReduceOp::kSum, ctx.size, 5, "uneven." + std::to_string(n));
          }
          EXPECT_EQ(MappedSegments(), 0);
        },
        opts);
  }
}

// A fused group's spans go through as one vector: chunks are filled across
// span boundaries (so the group costs the chunks of its total, not a pass
// per span), and every element lands back in its own span.
TEST(HierarchicalAllreduceSpans, SpansAreReducedAsOneVector) {
  RankOptions opts = OnHosts(Layout{2, 2, false}, "shm");
  opts.init = false;
  opts.deadline = std::chrono::seconds(60);
  KH_RUN_RANKS(
      4,
      [](Runtime&, const RankContext& ctx) {
        signal(SIGPIPE, SIG_IGN);
        auto world = ConnectGlooContext(ctx.config, "hierarchical-spans");
        ASSERT_TRUE(world.ok()) << world.status();
        auto hier = shm::HierarchicalAllreduce::Connect(ctx.config, *world);
        ASSERT_TRUE(hier.ok()) << hier.status();
        ASSERT_NE(*hier, nullptr);
        const size_t c = static_cast<size_t>(ChunkElems(DataType::kFloat32));
        const std::vector<size_t> lengths = {3, c - 1, 2, c + 5, 1, 7};
        std::vector<std::vector<float>> buffers;
        std::vector<Backend::Span> spans;
        size_t total = 0;
        for (size_t b = 0; b < lengths.size(); ++b) {
          buffers.emplace_back(lengths[b]);
          for (size_t i = 0; i < lengths[b]; ++i)
            buffers[b][i] = static_cast<float>((ctx.rank + 1) * (100 * b + i % 13));
          total += lengths[b];
        }
        for (auto& b : buffers) spans.push_back({b.data(), b.size()});
        ASSERT_TRUE((*hier)->AllreduceSpans(spans, DataType::kFloat32, ReduceOp::kSum).ok());
        EXPECT_EQ((*hier)->chunks(), (total + c - 1) / c) << "chunks span the tensors";
        const float ranks_sum = 1 + 2 + 3 + 4;
        for (size_t b = 0; b < lengths.size(); ++b)
          for (size_t i = 0; i < lengths[b]; ++i)
            ASSERT_EQ(buffers[b][i], ranks_sum * static_cast<float>(100 * b + i % 13))
                << "span " << b << " element " << i;
      },
      opts);
}

// Rank 3 (host 1, local rank 1) dies between steps (while the others are
// in a step, waiting for it). Its host-mate finds it
// gone at the shared-memory barrier, its cross peer through Gloo; every
// survivor must see kUnavailable well within a few transport timeouts.
TEST(HierarchicalAllreducePeerDeath, SurvivorsOnEveryHostGetUnavailable) {
  RankOptions opts = OnHosts(Layout{2, 2, false}, "shm");
  opts.env["KHOROVOD_TIMEOUT_SECONDS"] = "5";
  opts.expect_killed = {3};
  opts.deadline = std::chrono::seconds(60);
  KH_RUN_RANKS(
      4,
      [](Runtime& rt, const RankContext& ctx) {
        Tensor t = MakeTensor(DataType::kFloat32, {1 << 20}, ReduceOp::kSum, ctx.rank, 1);
        for (int step = 0; step < 3; ++step)
          ASSERT_TRUE(rt.allreduce("step", t.view(), t.view()).ok());
        ASSERT_TRUE(rt.barrier().ok());
        if (ctx.rank == 3) {
          // Dying at once could reset connections whose last bytes (of the
          // barrier, or a step) a peer has not read yet: that peer would
          // fail a step it was entitled to finish. The survivors are past
          // the barrier, or about to be, when it dies.
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          raise(SIGKILL);
        }
        const auto start = std::chrono::steady_clock::now();
        Status s;
        for (int step = 0; step < 1000 && s.ok(); ++step)
          s = rt.allreduce("step", t.view(), t.view());
        EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
      },
      opts);
}

// The same death inside the data plane, without the runtime (whose own
// negotiation would notice it first): rank 3 dies between two allreduces
// while the others are already in the next one. Its host-mate finds it gone
// at a barrier, its cross peer gets a reset; each then marks itself departed
// and fails its cross pairs, so the other host's second rank stops too. All
// of them must return kUnavailable well before the transport timeout, and
// stay broken.
TEST(HierarchicalAllreducePeerDeath, InsideTheDataPlaneNobodyWaitsForTheTimeout) {
  RankOptions opts = OnHosts(Layout{2, 2, false}, "shm");
  opts.init = false;
  opts.env["KHOROVOD_TIMEOUT_SECONDS"] = "10";
  opts.expect_killed = {3};
  opts.deadline = std::chrono::seconds(60);
  KH_RUN_RANKS(
      4,
      [](Runtime&, const RankContext& ctx) {
        // As Runtime::init does: a write to a dead peer's socket must fail,
        // not kill the writer.
        signal(SIGPIPE, SIG_IGN);
        auto world = ConnectGlooContext(ctx.config, "hierarchical-death");
        ASSERT_TRUE(world.ok()) << world.status();
        auto hier = shm::HierarchicalAllreduce::Connect(ctx.config, *world);
        ASSERT_TRUE(hier.ok()) << hier.status();
        ASSERT_NE(*hier, nullptr) << "a 2x2 layout takes the hierarchical path";
        EXPECT_EQ((*hier)->hosts(), 2);
        std::vector<float> data(1 << 20, 1.0f);  // two chunks
        Status s;
        auto failed_after = std::chrono::steady_clock::duration::zero();
        for (int step = 0; step < 1000 && s.ok(); ++step) {
          if (ctx.rank == 3 && step == 20) raise(SIGKILL);
          const auto start = std::chrono::steady_clock::now();
          s = (*hier)->Allreduce(data.data(), data.data(), data.size(), DataType::kFloat32,
                                 ReduceOp::kMax);
          failed_after = std::chrono::steady_clock::now() - start;
        }
        EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
        EXPECT_LT(failed_after, std::chrono::seconds(5)) << s;
        Status again = (*hier)->Allreduce(data.data(), data.data(), data.size(), DataType::kFloat32,
                                          ReduceOp::kMax);
        EXPECT_EQ(again.code(), StatusCode::kUnavailable) << "stays broken";
        // Stay alive past the bound: a peer released only by this process's
        // exit (not by its departure mark or failed pairs) fails the bound.
        std::this_thread::sleep_for(std::chrono::milliseconds(5500));
      },
      opts);
}

}  // namespace
}  // namespace khorovod::testing
