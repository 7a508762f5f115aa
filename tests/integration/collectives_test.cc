// Every collective, op and dtype across 2, 3 and 4 real processes over
// loopback, checked against float64 references computed in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/runtime_internals.h"
#include "multiproc.h"
#include "observability/worker_metrics.h"
#include "tensor_data.h"

namespace khorovod::testing {
namespace {

// Includes 0, 1, and sizes that are not multiples of any rank count.
const int64_t kLengths[] = {0, 1, 7, 33, 1001, 65537};

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, AllreduceEveryDtypeOpAndLengthFused) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    struct Case {
      std::string name;
      ReduceOp op;
      int seed;
      Tensor in, out;
    };
    std::vector<Case> cases;
    int seed = 0;
    for (DataType dt : kAllDataTypes) {
      for (ReduceOp op : kReduceOps) {
        for (int64_t n : kLengths) {
          Case c{"t." + std::string(DataTypeName(dt)) + "." + std::string(ReduceOpName(op)) + "." +
                     std::to_string(n),
                 op, ++seed, MakeTensor(dt, {n}, op, ctx.rank, seed), Tensor(dt, {n})};
          cases.push_back(std::move(c));
        }
      }
    }
    // Submit everything before waiting: the runtime fuses compatible tensors.
    std::vector<Handle> handles;
    for (Case& c : cases)
      handles.push_back(rt.allreduce_async(c.name, c.in.view(), c.out.view(), {c.op}));
    for (size_t i = 0; i < cases.size(); ++i) {
      ASSERT_TRUE(handles[i].wait().ok()) << cases[i].name;
      CheckAllreduced(cases[i].out, cases[i].op, ctx.size, cases[i].seed, cases[i].name);
    }
  });
}

TEST_P(CollectivesTest, AllreduceInPlaceOneAtATimeWithScaling) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16}) {
      for (int64_t n : {int64_t{5}, int64_t{4099}}) {
        Tensor t = MakeTensor(dt, {n}, ReduceOp::kSum, ctx.rank, 42);
        AllreduceOptions opts;
        opts.op = ReduceOp::kSum;
        opts.prescale_factor = 0.5;
        opts.postscale_factor = 4.0;
        ASSERT_TRUE(rt.allreduce("scaled." + std::to_string(n), t.view(), t.view(), opts).ok());
        for (int64_t i = 0; i < n; ++i) {
          const double ref = Reference(dt, ReduceOp::kSum, ctx.size, i, 42) * 2.0;
          ASSERT_DOUBLE_EQ(LoadValue(dt, t.data(), i), ref) << DataTypeName(dt) << " i=" << i;
        }
      }
    }
  });
}

TEST_P(CollectivesTest, AllgatherWithDifferentFirstDimensions) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    for (DataType dt : kAllDataTypes) {
      // Rank r contributes r rows (rank 0 contributes none) of 3 columns.
      Tensor in = MakeTensor(dt, {ctx.rank, 3}, ReduceOp::kSum, ctx.rank, 7);
      Tensor out;
      ASSERT_TRUE(rt.allgather("gather." + std::string(DataTypeName(dt)), in.view(), &out).ok());
      int64_t rows = 0;
      for (int r = 0; r < ctx.size; ++r) rows += r;
      ASSERT_EQ(out.shape, (Shape{rows, 3}));
      int64_t offset = 0;
      for (int r = 0; r < ctx.size; ++r) {
        for (int64_t i = 0; i < r * 3; ++i) {
          ASSERT_EQ(LoadValue(dt, out.data(), offset + i),
                    LoadValue(dt, MakeTensor(dt, {r, 3}, ReduceOp::kSum, r, 7).data(), i));
        }
        offset += r * 3;
      }
    }
  });
}

TEST_P(CollectivesTest, BroadcastFromEveryRoot) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    for (int root = 0; root < ctx.size; ++root) {
      for (DataType dt : kAllDataTypes) {
        Tensor t = MakeTensor(dt, {13, 2}, ReduceOp::kSum, ctx.rank, 3);
        ASSERT_TRUE(
            rt.broadcast("bcast." + std::to_string(root) + "." + std::string(DataTypeName(dt)),
                         t.view(), {root})
                .ok());
        Tensor expected = MakeTensor(dt, {13, 2}, ReduceOp::kSum, root, 3);
        ASSERT_EQ(t.storage, expected.storage) << "root " << root << " " << DataTypeName(dt);
      }
    }
  });
}

TEST_P(CollectivesTest, AlltoallWithUnevenSplits) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    const int n = ctx.size;
    // Rank s sends (s + d) % 3 rows to rank d; row values encode (s, d, row).
    auto rows = [](int s, int d) { return static_cast<int64_t>((s + d) % 3); };
    std::vector<int64_t> splits;
    int64_t total = 0;
    for (int d = 0; d < n; ++d) splits.push_back(rows(ctx.rank, d)), total += rows(ctx.rank, d);
    Tensor in(DataType::kInt32, {total, 2});
    int64_t row = 0;
    for (int d = 0; d < n; ++d) {
      for (int64_t k = 0; k < rows(ctx.rank, d); ++k, ++row) {
        in.data_as<int32_t>()[row * 2] = ctx.rank * 1000 + d;
        in.data_as<int32_t>()[row * 2 + 1] = static_cast<int32_t>(k);
      }
    }
    Tensor out;
    std::vector<int64_t> received;
    ASSERT_TRUE(rt.alltoall("a2a", in.view(), &out, &received, {splits}).ok());
    ASSERT_EQ(received.size(), static_cast<size_t>(n));
    row = 0;
    for (int s = 0; s < n; ++s) {
      ASSERT_EQ(received[s], rows(s, ctx.rank));
      for (int64_t k = 0; k < received[s]; ++k, ++row) {
        ASSERT_EQ(out.data_as<int32_t>()[row * 2], s * 1000 + ctx.rank);
        ASSERT_EQ(out.data_as<int32_t>()[row * 2 + 1], k);
      }
    }
    // Equal split without explicit splits.
    Tensor even = MakeTensor(DataType::kFloat32, {2 * n}, ReduceOp::kSum, ctx.rank, 9);
    ASSERT_TRUE(rt.alltoall("a2a.even", even.view(), &out).ok());
    for (int s = 0; s < n; ++s) {
      Tensor theirs = MakeTensor(DataType::kFloat32, {2 * n}, ReduceOp::kSum, s, 9);
      for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(out.data_as<float>()[s * 2 + k], theirs.data_as<float>()[ctx.rank * 2 + k]);
      }
    }
  });
}

TEST_P(CollectivesTest, ReducescatterRowsNotMultipleOfSize) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    for (DataType dt : kAllDataTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        const int64_t rows = 2 * ctx.size + 1, cols = 3;
        Tensor in = MakeTensor(dt, {rows, cols}, op, ctx.rank, 11);
        Tensor out;
        ReducescatterOptions opts;
        opts.op = op;
        ASSERT_TRUE(
            rt.reducescatter("rs." + std::string(DataTypeName(dt)) + std::string(ReduceOpName(op)),
                             in.view(), &out, opts)
                .ok());
        const int64_t base = rows / ctx.size, extra = rows % ctx.size;
        const int64_t mine = base + (ctx.rank < extra ? 1 : 0);
        const int64_t first = ctx.rank * base + std::min<int64_t>(ctx.rank, extra);
        ASSERT_EQ(out.shape, (Shape{mine, cols}));
        for (int64_t i = 0; i < mine * cols; ++i) {
          const double ref = Reference(dt, op, ctx.size, first * cols + i, 11);
          ASSERT_NEAR(LoadValue(dt, out.data(), i), ref, Tolerance(dt, op, ref));
        }
      }
    }
  });
}

TEST_P(CollectivesTest, OutOfOrderSubmissionCompletes) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    const int kTensors = 40;
    for (int step = 0; step < 3; ++step) {  // step 0 negotiates, later steps hit the cache
      std::vector<int> order(kTensors);
      std::iota(order.begin(), order.end(), 0);
      std::mt19937 rng(ctx.rank * 100 + step);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<Tensor> ins, outs;
      for (int i = 0; i < kTensors; ++i) {
        ins.push_back(MakeTensor(DataType::kFloat32, {i + 1}, ReduceOp::kSum, ctx.rank, i));
        outs.emplace_back(DataType::kFloat32, Shape{i + 1});
      }
      std::vector<Handle> handles(kTensors);
      for (int i : order) {
        handles[i] = rt.allreduce_async("ooo." + std::to_string(i), ins[i].view(), outs[i].view(),
                                        {ReduceOp::kSum});
      }
      for (int i = 0; i < kTensors; ++i) {
        ASSERT_TRUE(handles[i].wait().ok());
        CheckAllreduced(outs[i], ReduceOp::kSum, ctx.size, i, "ooo");
      }
    }
  });
}

TEST_P(CollectivesTest, ThousandSmallTensorsInOneStep) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    const int kTensors = 1200;
    std::vector<Tensor> ins, outs;
    for (int i = 0; i < kTensors; ++i) {
      ins.push_back(MakeTensor(DataType::kFloat32, {1 + i % 9}, ReduceOp::kSum, ctx.rank, i));
      outs.emplace_back(DataType::kFloat32, Shape{1 + i % 9});
    }
    for (int step = 0; step < 2; ++step) {
      std::vector<Handle> handles;
      for (int i = 0; i < kTensors; ++i) {
        handles.push_back(rt.allreduce_async("small." + std::to_string(i), ins[i].view(),
                                             outs[i].view(), {ReduceOp::kSum}));
      }
      for (int i = 0; i < kTensors; ++i) {
        ASSERT_TRUE(handles[i].wait().ok());
        CheckAllreduced(outs[i], ReduceOp::kSum, ctx.size, i, "small." + std::to_string(i));
      }
    }
  });
}

TEST_P(CollectivesTest, GroupedAllreduceAndBarrier) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> ins, outs;
      std::vector<TensorView> in_views, out_views;
      std::vector<std::string> names;
      for (int i = 0; i < 5; ++i) {
        ins.push_back(MakeTensor(DataType::kFloat64, {10 * i + 1}, ReduceOp::kSum, ctx.rank, i));
        outs.emplace_back(DataType::kFloat64, Shape{10 * i + 1});
        names.push_back("grp." + std::to_string(i));
      }
      for (int i = 0; i < 5; ++i)
        in_views.push_back(ins[i].view()), out_views.push_back(outs[i].view());
      ASSERT_TRUE(rt.grouped_allreduce(names, in_views, out_views, {ReduceOp::kSum}).ok());
      for (int i = 0; i < 5; ++i) CheckAllreduced(outs[i], ReduceOp::kSum, ctx.size, i, names[i]);
      ASSERT_TRUE(rt.barrier().ok());
    }
  });
}

TEST_P(CollectivesTest, JoinLetsOtherRanksFinishWithZeros) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    // Rank r runs r + 1 steps, then joins; a step's sums only count the
    // ranks that have not joined yet. Each step has a lone allreduce and a
    // fused pair with a tensor large enough to be reduced in place, so the
    // joined ranks must mirror both execution paths.
    for (int step = 0; step <= ctx.rank; ++step) {
      const float active = static_cast<float>(ctx.size - step);
      Tensor t(DataType::kFloat32, {4});
      std::fill(t.data_as<float>(), t.data_as<float>() + 4, 1.0f);
      ASSERT_TRUE(rt.allreduce("join.step", t.view(), t.view(), {ReduceOp::kSum}).ok());
      ASSERT_EQ(t.data_as<float>()[0], active) << "step " << step;
      Tensor big(DataType::kFloat32, {40000}), small(DataType::kFloat32, {3});
      std::fill(big.data_as<float>(), big.data_as<float>() + 40000, 2.0f);
      std::fill(small.data_as<float>(), small.data_as<float>() + 3, 1.0f);
      Handle hb = rt.allreduce_async("join.big", big.view(), big.view(), {ReduceOp::kSum});
      Handle hs = rt.allreduce_async("join.small", small.view(), small.view(), {ReduceOp::kSum});
      ASSERT_TRUE(hb.wait().ok());
      ASSERT_TRUE(hs.wait().ok());
      ASSERT_EQ(big.data_as<float>()[39999], 2 * active) << "step " << step;
      ASSERT_EQ(small.data_as<float>()[2], active) << "step " << step;
    }
    int last = -2;
    ASSERT_TRUE(rt.join(&last).ok());
    EXPECT_EQ(last, ctx.size - 1);
    // The runtime is usable again after everyone joined.
    Tensor t(DataType::kFloat32, {1});
    t.data_as<float>()[0] = 1;
    ASSERT_TRUE(rt.allreduce("after.join", t.view(), t.view(), {ReduceOp::kSum}).ok());
    EXPECT_EQ(t.data_as<float>()[0], static_cast<float>(ctx.size));
  });
}

// Repeated small allreduces hit the response cache, and then most of them
// travel with the negotiation (core/eager_allreduce.h) while the rest, past
// the payload's room, take the data exchange in the same round. Both must
// give the reference values, and every rank the very same bytes.
TEST_P(CollectivesTest, SteadyStateSmallAllreducesAgreeBitwiseOnEveryPath) {
  KH_RUN_RANKS(GetParam(), [](Runtime& rt, const RankContext& ctx) {
    struct Case {
      std::string name;
      DataType dtype;
      int64_t length;
      ReduceOp op;
      int seed;
      AllreduceOptions opts;
    };
    std::vector<Case> cases;
    int seed = 100;
    for (DataType dt :
         {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{33}}) {
          Case c{std::string(DataTypeName(dt)) + "." + std::string(ReduceOpName(op)) + "." +
                     std::to_string(n),
                 dt,
                 n,
                 op,
                 ++seed,
                 {}};
          c.opts.op = op;
          if (op == ReduceOp::kSum && dt != DataType::kInt32) {
            c.opts.prescale_factor = 0.5;
            c.opts.postscale_factor = 2.0;
          }
          cases.push_back(c);
        }
      }
    }
    constexpr int kSteps = 4;
    for (int step = 0; step < kSteps; ++step) {
      std::vector<Tensor> ins, outs;
      std::vector<Handle> handles;
      for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        ins.push_back(MakeTensor(c.dtype, {c.length}, c.op, ctx.rank, c.seed));
        outs.emplace_back(c.dtype, Shape{c.length});
      }
      for (size_t i = 0; i < cases.size(); ++i) {
        handles.push_back(
            rt.allreduce_async(cases[i].name, ins[i].view(), outs[i].view(), cases[i].opts));
      }
      std::vector<uint8_t> all_bytes;
      for (size_t i = 0; i < cases.size(); ++i) {
        ASSERT_TRUE(handles[i].wait().ok()) << cases[i].name << " step " << step;
        CheckAllreduced(outs[i], cases[i].op, ctx.size, cases[i].seed, cases[i].name);
        const auto* b = static_cast<const uint8_t*>(outs[i].data());
        all_bytes.insert(all_bytes.end(), b, b + outs[i].storage.size());
      }
      // Every rank must hold the same bytes: gather them and compare.
      Tensor mine(DataType::kUInt8, {static_cast<int64_t>(all_bytes.size())});
      std::memcpy(mine.data(), all_bytes.data(), all_bytes.size());
      Tensor gathered;
      ASSERT_TRUE(rt.allgather("check.bytes", mine.view(), &gathered).ok());
      const auto* g = static_cast<const uint8_t*>(gathered.data());
      for (int r = 1; r < ctx.size; ++r) {
        ASSERT_EQ(std::memcmp(g, g + r * all_bytes.size(), all_bytes.size()), 0)
            << "rank " << r << " differs from rank 0 at step " << step;
      }
    }
    const std::string text = RuntimeInternals::Metrics(rt).Render();
    const std::string metric = "\nkhorovod_worker_eager_allreduce_tensors_total ";
    const size_t at = text.find(metric);
    ASSERT_NE(at, std::string::npos) << text;
    // Every step after the first hits the cache, and at least one tensor
    // per such step fits the payload.
    EXPECT_GE(std::stod(text.substr(at + metric.size())), kSteps - 1) << text;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace khorovod::testing
