// HttpStore: Gloo's Store contract over the rendezvous server, and a real
// Gloo context (tcp device on 127.0.0.1) formed through it by four threads.
#include "http_store.h"

#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "rendezvous_client.h"
#include "test_server.h"

namespace khorovod::rendezvous {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::vector<char> Bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

HttpStoreOptions Fast(milliseconds timeout) {
  HttpStoreOptions o;
  o.timeout = timeout;
  o.retry.max_attempts = 3;
  o.retry.initial_backoff = milliseconds(10);
  return o;
}

TEST(HttpStore, SetGetRoundTripsBinaryValues) {
  testing::TestServer server;
  HttpStore store(server.endpoint(), testing::kJob, 0);
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  store.set("all-bytes", Bytes(all));
  store.set("empty", {});
  EXPECT_EQ(store.get("all-bytes"), Bytes(all));
  EXPECT_TRUE(store.get("empty").empty());
  store.set("all-bytes", Bytes("overwritten"));
  EXPECT_EQ(store.get("all-bytes"), Bytes("overwritten"));
  store.wait({"all-bytes", "empty"});
  store.wait({"all-bytes"}, milliseconds(0));
}

TEST(HttpStore, GetBlocksUntilAnotherStoreSetsTheKey) {
  testing::TestServer server;
  HttpStore reader(server.endpoint(), testing::kJob, 0);
  HttpStore writer(server.endpoint(), testing::kJob, 0);
  auto got = std::async(std::launch::async, [&] { return reader.get("rank_1"); });
  auto waited = std::async(std::launch::async, [&] {
    reader.wait({"rank_1", "rank_2"}, milliseconds(20000));
  });
  writer.set("rank_1", Bytes("addr1"));
  writer.set("rank_2", Bytes("addr2"));
  EXPECT_EQ(got.get(), Bytes("addr1"));
  waited.get();  // rethrows on failure
}

TEST(HttpStore, GetAndWaitTimeOutWithGlooIoException) {
  testing::TestServer server;
  HttpStore store(server.endpoint(), testing::kJob, 0, Fast(milliseconds(300)));
  auto start = Clock::now();
  try {
    store.get("missing");
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("timeout"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - start, milliseconds(300));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));

  start = Clock::now();
  store.set("present", Bytes("x"));
  EXPECT_THROW(store.wait({"present", "missing"}, milliseconds(200)), gloo::IoException);
  EXPECT_GE(Clock::now() - start, milliseconds(200));
  // Gloo's "no timeout" (0) falls back to the store's bound instead of hanging.
  EXPECT_THROW(store.wait({"missing"}, milliseconds(0)), gloo::IoException);
  EXPECT_THROW(store.wait({"missing"}), std::runtime_error);
}

TEST(HttpStore, AddCountsAtomicallyAcrossThreads) {
  testing::TestServer server;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      HttpStore store(server.endpoint(), testing::kJob, 0);
      for (int i = 0; i < 25; ++i) store.add("counter", 2);
    });
  }
  for (auto& th : threads) th.join();
  HttpStore store(server.endpoint(), testing::kJob, 0);
  EXPECT_EQ(store.add("counter", 0), 200);
  EXPECT_EQ(store.get("counter"), Bytes("200"));
  store.set("text", Bytes("abc"));
  EXPECT_THROW(store.add("text", 1), gloo::IoException);
}

TEST(HttpStore, ErrorsThrowInsteadOfHanging) {
  testing::TestServer server;
  HttpStore bad_token(server.endpoint("wrong"), testing::kJob, 0, Fast(milliseconds(5000)));
  try {
    bad_token.set("k", Bytes("v"));
    ADD_FAILURE() << "a wrong token was accepted";
  } catch (const gloo::IoException& e) {
    EXPECT_NE(std::string(e.what()).find("401"), std::string::npos) << e.what();
  }
  HttpStore future_generation(server.endpoint(), testing::kJob, 5, Fast(milliseconds(5000)));
  EXPECT_THROW(future_generation.get("k"), gloo::IoException);
  HttpStore other_job(server.endpoint(), "job2", 0, Fast(milliseconds(5000)));
  EXPECT_THROW(other_job.wait({"k"}), gloo::IoException);

  int port = server.port();
  server.Stop();
  HttpStore unreachable(HttpEndpoint{"127.0.0.1", port, testing::kToken}, testing::kJob, 0,
                        Fast(milliseconds(500)));
  auto start = Clock::now();
  EXPECT_THROW(unreachable.get("k"), gloo::IoException);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
}

TEST(HttpStore, GenerationsAreSeparateNamespaces) {
  testing::TestServer server;
  RendezvousClient client(server.endpoint(), testing::kJob, {"w0", "127.0.0.1", 1});
  ASSERT_TRUE(client.Register().ok());
  auto g = client.WaitForNextGeneration(milliseconds(20000));
  ASSERT_TRUE(g.ok()) << g.status().message();
  HttpStore gen0(server.endpoint(), testing::kJob, 0);
  HttpStore gen1(server.endpoint(), testing::kJob, g->generation);
  gen0.set("k", Bytes("zero"));
  gen1.set("k", Bytes("one"));
  EXPECT_EQ(gen0.get("k"), Bytes("zero"));
  EXPECT_EQ(gen1.get("k"), Bytes("one"));
}

// Three workers form generation 1; one dies before publishing its address
// (the launcher reports it). The two survivors, blocked in connectFullMesh on
// its key with a 60 s transport timeout, get generation_over within seconds
// and can ask for the next generation, which forms without the dead one.
TEST(HttpStore, SurvivorsWaitingForADeadPeersAddressGiveUpAtOnce) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 2;
  options.service.policy.max_workers = 3;
  testing::TestServer server(options);
  constexpr int kWorkers = 3;
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  std::vector<GenerationInfo> infos(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    clients.push_back(std::make_unique<RendezvousClient>(
        server.endpoint(), testing::kJob,
        WorkerIdentity{"worker-" + std::to_string(w), "127.0.0.1", 4}));
    ASSERT_TRUE(clients.back()->Register().ok());
  }
  std::vector<std::thread> formers;
  for (int w = 0; w < kWorkers; ++w) {
    formers.emplace_back([&, w] {
      auto g = clients[w]->WaitForNextGeneration(milliseconds(30000));
      if (g.ok()) infos[w] = *g;
    });
  }
  for (auto& t : formers) t.join();
  ASSERT_EQ(infos[0].generation, 1);
  ASSERT_EQ(infos[0].size, kWorkers);
  const int dead = 2;  // never connects
  std::vector<std::string> errors(kWorkers);
  std::vector<Clock::duration> took(kWorkers);
  std::vector<std::thread> survivors;
  for (int w = 0; w < kWorkers; ++w) {
    if (w == dead) continue;
    survivors.emplace_back([&, w] {
      auto start = Clock::now();
      try {
        HttpStore store(server.endpoint(), testing::kJob, infos[w].generation,
                        Fast(milliseconds(60000)));
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        auto context = std::make_shared<gloo::rendezvous::Context>(infos[w].rank, infos[w].size);
        context->setTimeout(milliseconds(60000));
        auto device = gloo::transport::tcp::CreateDevice(attr);
        context->connectFullMesh(store, device);
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
      took[w] = Clock::now() - start;
    });
  }
  std::this_thread::sleep_for(
      milliseconds(300));  // the survivors are waiting for the dead one's key
  ASSERT_TRUE(clients[dead]->ReportFailure("killed").ok());
  for (auto& t : survivors) t.join();
  for (int w = 0; w < kWorkers; ++w) {
    if (w == dead) continue;
    EXPECT_NE(errors[w].find("generation_over"), std::string::npos)
        << "worker " << w << ": " << errors[w];
    EXPECT_LT(took[w], std::chrono::seconds(20))
        << "worker " << w << " waited for the transport timeout";
  }
  std::vector<std::thread> reformers;
  std::vector<int64_t> next(kWorkers, 0);
  for (int w = 0; w < kWorkers; ++w) {
    if (w == dead) continue;
    reformers.emplace_back([&, w] {
      auto g = clients[w]->WaitForNextGeneration(milliseconds(30000));
      if (g.ok() && g->size == kWorkers - 1) next[w] = g->generation;
    });
  }
  for (auto& t : reformers) t.join();
  EXPECT_EQ(next[0], 2);
  EXPECT_EQ(next[1], 2);
}

// Four workers register, get a generation from the server, connect a Gloo
// full mesh through HttpStore and allreduce.
TEST(HttpStore, FourThreadsFormAGlooContextAndAllreduce) {
  ServerOptions options = testing::DefaultOptions();
  options.service.policy.min_workers = 4;
  options.service.policy.max_workers = 4;
  testing::TestServer server(options);
  constexpr int kWorkers = 4;
  constexpr size_t kCount = 1000;
  std::vector<std::string> errors(kWorkers);
  std::vector<std::vector<float>> results(kWorkers);
  std::vector<GenerationInfo> infos(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      try {
        RendezvousClient client(server.endpoint(), testing::kJob,
                                {"worker-" + std::to_string(w), "127.0.0.1", 4});
        Status s = client.Register();
        if (!s.ok()) throw std::runtime_error(s.message());
        StatusOr<GenerationInfo> g = client.WaitForNextGeneration(milliseconds(30000));
        if (!g.ok()) throw std::runtime_error(g.status().message());
        infos[w] = *g;
        HttpStore store(server.endpoint(), testing::kJob, g->generation);
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        auto device = gloo::transport::tcp::CreateDevice(attr);
        auto context = std::make_shared<gloo::rendezvous::Context>(g->rank, g->size);
        context->setTimeout(milliseconds(30000));
        context->connectFullMesh(store, device);
        std::vector<float> data(kCount, static_cast<float>(g->rank + 1));
        gloo::AllreduceOptions opts(context);
        opts.setOutput(data.data(), data.size());
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(7);
        gloo::allreduce(opts);
        results[w] = data;
        (void)client.Leave("done");
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int> ranks;
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(errors[w], "") << "worker " << w;
    EXPECT_EQ(infos[w].size, kWorkers);
    EXPECT_EQ(infos[w].local_size, kWorkers);
    EXPECT_EQ(infos[w].local_rank, infos[w].rank);
    EXPECT_EQ(infos[w].cross_size, 1);
    ranks.insert(infos[w].rank);
    ASSERT_EQ(results[w].size(), kCount);
    for (float v : results[w]) ASSERT_EQ(v, 10.0f) << "1+2+3+4";
  }
  EXPECT_EQ(ranks.size(), 4u);
}

}  // namespace
}  // namespace khorovod::rendezvous
