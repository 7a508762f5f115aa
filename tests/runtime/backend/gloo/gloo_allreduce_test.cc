// The Gloo backend's allreduce algorithms (one-hop direct exchange, span
// ring, Gloo's own ring) and its broadcast across real forked processes on
// loopback: the same
// results, bit for bit, for every size and rank count, in place and out of
// place; and a peer that dies mid-collective surfaces as kUnavailable on the
// survivor within the context's timeout, never as a crash or a hang.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backend/gloo/gloo_direct.h"
#include "backend/gloo/gloo_ops.h"
#include "backend/gloo/gloo_ring.h"

namespace khorovod::gloo_ops {
namespace {

using RankFn = std::function<int(const std::shared_ptr<gloo::Context>&)>;

std::shared_ptr<gloo::Context> Connect(const std::string& dir, int rank, int size,
                                       std::chrono::milliseconds timeout) {
  gloo::rendezvous::FileStore store(dir);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  ctx->connectFullMesh(store, device);
  return ctx;
}

// Forks `size` ranks running fn; returns each rank's exit code (-1: killed
// or past the deadline, after which it is killed).
std::vector<int> RunRanks(int size, std::chrono::milliseconds timeout, const RankFn& fn) {
  char tmpl[] = "/tmp/kh-gloo-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      // As the runtime does (core/runtime.cc): Gloo writes without
      // MSG_NOSIGNAL, and a write to a dead peer must fail, not kill the rank.
      std::signal(SIGPIPE, SIG_IGN);
      int rc = 90;
      try {
        auto ctx = Connect(dir, rank, size, timeout);
        // Every rank is through connecting before any of them can exit:
        // one that left early would fail a peer's connect, not the test.
        if (!Barrier(ctx).ok()) std::_Exit(91);
        rc = fn(ctx);
        if (rc == 0 && !Barrier(ctx).ok()) rc = 92;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      }
      std::_Exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(size, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int left = size; left > 0 && std::chrono::steady_clock::now() < deadline;) {
    for (int r = 0; r < size; ++r) {
      int status = 0;
      if (codes[r] != -1 || pids[r] == 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      pids[r] = 0;
      --left;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (pid_t pid : pids) {
    if (pid == 0) continue;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::filesystem::remove_all(dir);
  return codes;
}

// Integer-valued floats: every summation order gives the exact reference.
float Value(int rank, size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 1000));
}

struct Case {
  int ranks;
  size_t count;
};

class GlooAllreduceTest : public ::testing::TestWithParam<Case> {};

TEST_P(GlooAllreduceTest, DirectRingAndGlooAgreeWithTheReference) {
  const Case c = GetParam();
  const auto codes = RunRanks(c.ranks, std::chrono::seconds(20), [c](const auto& ctx) {
    const ReduceFn sum = GetReduceFn(DataType::kFloat32, ReduceOp::kSum);
    std::vector<std::byte> direct_scratch, ring_scratch;
    const float weight = static_cast<float>(c.ranks * (c.ranks + 1) / 2);
    for (int round = 0; round < 2; ++round) {  // the second reuses the scratch
      std::vector<float> in(c.count), direct_out(c.count), in_place(c.count), ring(c.count),
          gloo(c.count);
      for (size_t i = 0; i < c.count; ++i)
        in[i] = in_place[i] = ring[i] = gloo[i] = Value(ctx->rank, i);
      const uint64_t slot = 100 + 10 * round;
      if (!DirectAllreduce(ctx, in.data(), direct_out.data(), c.count, 4, sum, slot,
                           &direct_scratch)
               .ok())
        return 1;
      if (!DirectAllreduce(ctx, in_place.data(), in_place.data(), c.count, 4, sum, slot + 1,
                           &direct_scratch)
               .ok())
        return 2;
      std::vector<Backend::Span> spans{{ring.data(), c.count}};
      if (!RingAllreduceSpans(ctx, spans, 4, sum, uint64_t{1} << 40 | slot, &ring_scratch).ok())
        return 3;
      if (!Allreduce(ctx, gloo.data(), gloo.data(), c.count, 4, sum).ok()) return 4;
      for (size_t i = 0; i < c.count; ++i) {
        const float want = weight * static_cast<float>(i % 1000);
        if (direct_out[i] != want || in_place[i] != want || ring[i] != want || gloo[i] != want)
          return 5;
      }
      for (size_t i = 0; i < c.count; ++i) {
        if (in[i] != Value(ctx->rank, i)) return 6;  // out of place leaves the input alone
      }
    }
    return 0;
  });
  for (int r = 0; r < c.ranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Sizes: empty, one element, not a multiple of any rank count, exactly one
// direct piece, and several pieces with a ragged tail.
INSTANTIATE_TEST_SUITE_P(SizesAndRanks, GlooAllreduceTest,
                         ::testing::Values(Case{2, 0}, Case{2, 1}, Case{2, 1001},
                                           Case{2, kDirectPieceBytes / 4}, Case{2, 300001},
                                           Case{3, 7}, Case{3, 300001}, Case{4, 33}, Case{4, 65537},
                                           Case{4, 300001}),
                         [](const auto& info) {
                           return std::to_string(info.param.ranks) + "ranks_" +
                                  std::to_string(info.param.count) + "floats";
                         });

// The span ring pipelines its steps: many pieces per chunk, span boundaries
// inside chunks and pieces, tiny spans between large ones, and chunks of
// ragged lengths. Every element of every span must come back as the exact
// sum, at rank counts with one, two and several reduce-scatter steps, and a
// second call must reuse the scratch.
class GlooRingSpansTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooRingSpansTest, PipelinedStepsReduceEverySpanExactly) {
  const int ranks = GetParam();
  const size_t piece = kPieceBytes / 4;
  const std::vector<size_t> lengths = {3, 5 * piece + 17, 1, 0, 2 * piece - 1, 7, 3 * piece + 2};
  const auto codes = RunRanks(ranks, std::chrono::seconds(20), [&](const auto& ctx) {
    const ReduceFn sum = GetReduceFn(DataType::kFloat32, ReduceOp::kSum);
    const float weight = static_cast<float>(ranks * (ranks + 1) / 2);
    std::vector<std::byte> scratch;
    for (int round = 0; round < 2; ++round) {
      std::vector<std::vector<float>> data;
      std::vector<Backend::Span> spans;
      for (size_t b = 0; b < lengths.size(); ++b) {
        data.emplace_back(lengths[b]);
        for (size_t i = 0; i < lengths[b]; ++i) data[b][i] = Value(ctx->rank, i + 31 * b);
      }
      for (auto& d : data) spans.push_back({d.data(), d.size()});
      if (!RingAllreduceSpans(ctx, spans, 4, sum, 500 + 100 * round, &scratch).ok()) return 1;
      for (size_t b = 0; b < lengths.size(); ++b) {
        for (size_t i = 0; i < lengths[b]; ++i) {
          if (data[b][i] != weight * static_cast<float>((i + 31 * b) % 1000)) return 2;
        }
      }
    }
    return 0;
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooRingSpansTest, ::testing::Values(2, 3, 4, 6),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// The binomial-tree broadcast on unbound buffers: every rank ends with the
// root's bytes, for every root, at rank counts whose trees have one to three
// levels, and sizes from one byte to several MiB.
class GlooBroadcastTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooBroadcastTest, EveryRankGetsTheRootsBytesFromEveryRoot) {
  const int size = GetParam();
  const auto codes = RunRanks(size, std::chrono::milliseconds(60000),
                              [size](const std::shared_ptr<gloo::Context>& ctx) {
                                for (int root = 0; root < size; ++root) {
                                  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{3} << 20}) {
                                    std::vector<uint8_t> buf(bytes);
                                    for (size_t i = 0; i < bytes; ++i)
                                      buf[i] = static_cast<uint8_t>(ctx->rank * 31 + i * 7 + root);
                                    if (!BroadcastBytes(ctx, buf.data(), bytes, root).ok())
                                      return 10;
                                    for (size_t i = 0; i < bytes; ++i) {
                                      if (buf[i] != static_cast<uint8_t>(root * 31 + i * 7 + root))
                                        return 11;
                                    }
                                  }
                                }
                                return 0;
                              });
  for (int r = 0; r < size; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooBroadcastTest, ::testing::Values(2, 3, 5, 8));

TEST(GlooDirectAllreduce, APeerThatDiesSurfacesAsUnavailableOnTheSurvivor) {
  const auto codes = RunRanks(2, std::chrono::seconds(3), [](const auto& ctx) {
    if (ctx->rank == 1) std::_Exit(0);  // dies connected, before sending any data
    const size_t count = 1 << 20;       // several pieces
    std::vector<float> data(count, 1.0f);
    std::vector<std::byte> scratch;
    const Status s = DirectAllreduce(ctx, data.data(), data.data(), count, 4,
                                     GetReduceFn(DataType::kFloat32, ReduceOp::kSum), 7, &scratch);
    // Nonzero skips the closing barrier, which the dead peer cannot join.
    return s.code() == StatusCode::kUnavailable ? 100 : 1;
  });
  EXPECT_EQ(codes[0], 100) << "the survivor returns kUnavailable, neither crashing nor hanging";
  EXPECT_EQ(codes[1], 0);
}

}  // namespace
}  // namespace khorovod::gloo_ops
