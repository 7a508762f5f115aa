// The worker of khorovodrun_ssh_test.sh: a khorovod program that reports
// where it runs and checks its collectives exactly.
//
//   ssh_job_worker static
//     prints its runtime placement, Horovod's launcher variables and the IPv4
//     addresses of the network namespace it runs in, then allreduces
//     1000 floats (rank*1000 + i) and checks every element against the exact
//     sum; exits 1 on a mismatch.
//   ssh_job_worker elastic STEPS DIE_HOST DIE_STEP
//     an elastic loop of STEPS committed steps, each an allreduce of 1.0 that
//     must equal the world size; the workers whose HOROVOD_HOSTNAME is
//     DIE_HOST SIGKILL themselves after committing step DIE_STEP.
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "khorovod/elastic.h"
#include "khorovod/runtime.h"

namespace {

using khorovod::DataType;
using khorovod::Status;
using khorovod::TensorView;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "unset";
}

std::string Cwd() {
  char path[4096] = {};
  return ::getcwd(path, sizeof path - 1) ? path : "?";
}

// The non-loopback IPv4 addresses here: which simulated host this is.
std::string Addresses() {
  std::string all;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "?";
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof text);
    if (std::string(text).rfind("127.", 0) != 0)
      all += (all.empty() ? "" : ",") + std::string(text);
  }
  ::freeifaddrs(list);
  return all.empty() ? "none" : all;
}

// How many processes' command lines hold this job's rendezvous token (the
// launcher keeps it off ssh's command line; /proc is shared by the
// simulated hosts, so this sees both ends of every ssh session).
int TokenOnCommandLines() {
  const char* token = std::getenv("KHOROVOD_RENDEZVOUS_TOKEN");
  if (token == nullptr || std::string(token).size() < 16) return -1;
  int found = 0;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return -1;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string pid = entry->d_name;
    if (pid.empty() || pid[0] < '0' || pid[0] > '9') continue;
    FILE* f = std::fopen(("/proc/" + pid + "/cmdline").c_str(), "rb");
    if (f == nullptr) continue;
    std::string cmdline;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) cmdline.append(buffer, n);
    std::fclose(f);
    if (cmdline.find(token) != std::string::npos) ++found;
  }
  ::closedir(proc);
  return found;
}

int Static() {
  khorovod::Runtime rt;
  if (Status s = rt.init(); !s.ok()) {
    std::fprintf(stderr, "init: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "placement rank=%d size=%d local_rank=%d cross_rank=%d HOROVOD_RANK=%s HOROVOD_LOCAL_RANK=%s "
      "HOROVOD_CROSS_RANK=%s HOROVOD_HOSTNAME=%s netns=%s SSH_TEST_MARK=%s cwd=%s "
      "token_on_cmdlines=%d\n",
      rt.rank(), rt.size(), rt.local_rank(), rt.cross_rank(), Env("HOROVOD_RANK").c_str(),
      Env("HOROVOD_LOCAL_RANK").c_str(), Env("HOROVOD_CROSS_RANK").c_str(),
      Env("HOROVOD_HOSTNAME").c_str(), Addresses().c_str(), Env("SSH_TEST_MARK").c_str(),
      Cwd().c_str(), TokenOnCommandLines());
  constexpr int kCount = 1000;
  std::vector<float> data(kCount);
  for (int i = 0; i < kCount; ++i) data[i] = static_cast<float>(rt.rank() * kCount + i);
  TensorView view{data.data(), DataType::kFloat32, {kCount}, {}};
  khorovod::AllreduceOptions sum;
  sum.op = khorovod::ReduceOp::kSum;
  if (Status s = rt.allreduce("exact", view, view, sum); !s.ok()) {
    std::fprintf(stderr, "allreduce: %s\n", s.ToString().c_str());
    return 1;
  }
  const int n = rt.size();
  for (int i = 0; i < kCount; ++i) {
    const float want = static_cast<float>(kCount * n * (n - 1) / 2 + n * i);
    if (data[i] != want) {
      std::printf("allreduce MISMATCH at %d: %f != %f\n", i, data[i], want);
      return 1;
    }
  }
  std::printf("rank %d allreduce exact\n", rt.rank());
  std::fflush(stdout);
  return rt.shutdown().ok() ? 0 : 1;
}

int Elastic(int steps, const std::string& die_host, int die_step) {
  khorovod::Runtime rt;
  if (Status s = rt.init(); !s.ok()) {
    std::fprintf(stderr, "init: %s\n", s.ToString().c_str());
    return 1;
  }
  khorovod::elastic::State state(rt);
  int64_t& step = state.counter("step");
  const std::string host = Env("HOROVOD_HOSTNAME");
  state.on_reset([&] {
    std::printf("reset: rank %d of %d on %s at step %lld\n", rt.rank(), rt.size(), host.c_str(),
                static_cast<long long>(step));
    std::fflush(stdout);
  });
  Status trained = khorovod::elastic::run(rt, state, [&]() -> Status {
    while (step < steps) {
      float one = 1.0f;
      TensorView view{&one, DataType::kFloat32, {1}, {}};
      khorovod::AllreduceOptions sum;
      sum.op = khorovod::ReduceOp::kSum;
      KH_RETURN_IF_ERROR(rt.allreduce("count", view, view, sum));
      if (one != static_cast<float>(rt.size()))
        return Status::Internal("allreduce of 1.0 gave " + std::to_string(one));
      ++step;
      KH_RETURN_IF_ERROR(state.commit());
      if (host == die_host && step == die_step) {
        std::printf("worker on %s: SIGKILL at step %d\n", host.c_str(), die_step);
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    return Status::Ok();
  });
  if (!trained.ok()) {
    std::fprintf(stderr, "training: %s\n", trained.ToString().c_str());
    return trained.code() == khorovod::StatusCode::kJobFinished ? 0 : 1;
  }
  std::printf("finished: rank %d of %d on %s after %lld steps\n", rt.rank(), rt.size(),
              host.c_str(), static_cast<long long>(step));
  std::fflush(stdout);
  return rt.shutdown().ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "static" && argc == 2) return Static();
  if (mode == "elastic" && argc == 5)
    return Elastic(std::atoi(argv[2]), argv[3], std::atoi(argv[4]));
  std::fprintf(stderr, "usage: ssh_job_worker static | elastic STEPS DIE_HOST DIE_STEP\n");
  return 2;
}
