#include "kube/leader_election.h"

#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "kube/resource.h"

namespace khorovod::kube {

std::string MicroTimeNow() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
            1000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::ostringstream ss;
  ss << std::put_time(&tm, "%Y-%m-%dT%H:%M:%S") << '.' << std::setw(6) << std::setfill('0') << us
     << 'Z';
  return ss.str();
}

bool ParseTime(const std::string& text, std::chrono::system_clock::time_point& out) {
  std::tm tm{};
  std::istringstream ss(text);
  ss >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (ss.fail()) return false;
  long micros = 0;
  if (ss.peek() == '.') {
    ss.get();
    std::string frac;
    while (std::isdigit(ss.peek())) frac.push_back(static_cast<char>(ss.get()));
    frac = (frac + "000000").substr(0, 6);
    micros = std::stol(frac);
  }
  out = std::chrono::system_clock::from_time_t(timegm(&tm)) + std::chrono::microseconds(micros);
  return true;
}

LeaderElector::LeaderElector(RestClient& client, LeaderElectionOptions options)
    : client_(client), options_(std::move(options)) {}

bool LeaderElector::Wait(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  lock.WaitFor(cv_, d, [this] { return stop_.load(); });
  return !stop_.load();
}

void LeaderElector::Stop() {
  stop_ = true;
  cv_.notify_all();
}

bool LeaderElector::TryAcquireOrRenew() {
  const std::string path = kLeases.ObjectPath(options_.lease_namespace, options_.lease_name);
  const std::string now = MicroTimeNow();
  auto current = client_.Get(path);
  if (!current.ok()) {
    if (current.status().code() != ApiCode::kNotFound) return false;
    Json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", options_.lease_name}, {"namespace", options_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", options_.identity},
          {"leaseDurationSeconds", options_.lease_duration.count()},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    return client_.Post(kLeases.CollectionPath(options_.lease_namespace), lease).ok();
  }
  Json lease = current.value();
  Json& spec = lease["spec"];
  const std::string holder = spec.value("holderIdentity", "");
  if (holder != options_.identity && !holder.empty()) {
    std::chrono::system_clock::time_point renewed;
    int duration =
        spec.value("leaseDurationSeconds", static_cast<int>(options_.lease_duration.count()));
    if (ParseTime(spec.value("renewTime", ""), renewed) &&
        std::chrono::system_clock::now() < renewed + std::chrono::seconds(duration))
      return false;  // held by a live leader
  }
  if (holder != options_.identity) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = options_.lease_duration.count();
  spec["renewTime"] = now;
  // PUT carries metadata.resourceVersion: a concurrent winner makes this 409.
  return client_.Put(path, lease).ok();
}

void LeaderElector::Run(const std::function<void()>& on_started,
                        const std::function<void()>& on_stopped) {
  while (!stop_ && !TryAcquireOrRenew()) {
    if (!Wait(options_.retry_period)) return;
  }
  if (stop_) return;
  leader_ = true;
  std::cerr << "leader election: " << options_.identity << " acquired lease "
            << options_.lease_namespace << "/" << options_.lease_name << "\n";
  on_started();
  auto last_renew = std::chrono::steady_clock::now();
  while (Wait(options_.retry_period)) {
    if (TryAcquireOrRenew()) {
      last_renew = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_renew > options_.renew_deadline) {
      leader_ = false;
      std::cerr << "leader election: " << options_.identity << " lost the lease\n";
      on_stopped();
      return;
    }
  }
}

void LeaderElector::Release() {
  if (!leader_) return;
  const std::string path = kLeases.ObjectPath(options_.lease_namespace, options_.lease_name);
  auto current = client_.Get(path);
  if (!current.ok()) return;
  Json lease = current.value();
  if (lease["spec"].value("holderIdentity", "") != options_.identity) return;
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  (void)client_.Put(path, lease);
  leader_ = false;
}

}  // namespace khorovod::kube
