#include "controller/controller.h"

#include <iostream>

#include "controller/cached_objects.h"
#include "controller/kueue_workload.h"
#include "controller/node_health.h"
#include "kube/resource.h"

namespace khorovod::op {

namespace {
kube::InformerOptions Owned(const ControllerOptions& o, std::function<Json(const Json&)> keep) {
  kube::InformerOptions i;
  i.transform = std::move(keep);
  i.namespace_ = o.watch_namespace;
  i.label_selector = kLabelJobName;  // only what the operator created
  i.resync = o.resync;
  i.watch_timeout = o.watch_timeout;
  return i;
}
std::unique_ptr<RendezvousMonitor> MakeMonitor(const ReconcilerOptions& o, kube::WorkQueue& queue) {
  if (o.rendezvous_refresh.count() <= 0) return nullptr;
  return std::make_unique<RendezvousMonitor>(
      RendezvousMonitorOptions{o.rendezvous_refresh, o.probe_timeout},
      [&queue](const std::string& key) { queue.Add(key); });
}
std::unique_ptr<kube::Informer> MakeWorkloads(kube::RestClient& client,
                                              const ControllerOptions& o) {
  if (!o.reconciler.kueue_available) return nullptr;
  kube::InformerOptions i;
  i.namespace_ = o.watch_namespace;
  i.label_selector = kLabelJobName;  // only the Workloads the operator created
  i.resync = o.resync;
  i.watch_timeout = o.watch_timeout;
  return std::make_unique<kube::Informer>(client, kWorkloads, i);
}
std::unique_ptr<kube::Informer> MakeNodes(kube::RestClient& client, const ControllerOptions& o) {
  if (!o.watch_nodes) return nullptr;
  kube::InformerOptions i;
  i.transform = CachedNode;
  i.resync = o.resync;
  i.watch_timeout = o.watch_timeout;
  return std::make_unique<kube::Informer>(client, kube::kNodes, i);
}
kube::InformerOptions All(const ControllerOptions& o) {
  kube::InformerOptions i;
  i.namespace_ = o.watch_namespace;
  i.resync = o.resync;
  i.watch_timeout = o.watch_timeout;
  return i;
}
}  // namespace

Controller::Controller(kube::RestClient& client, kube::EventRecorder& events,
                       ControllerOptions options)
    : options_(options),
      jobs_(client, kHorovodJobs, All(options)),
      pods_(client, kube::kPods, Owned(options, CachedPod)),
      services_(client, kube::kServices, Owned(options, CachedService)),
      workloads_(MakeWorkloads(client, options)),
      nodes_(MakeNodes(client, options)),
      monitor_(MakeMonitor(options.reconciler, queue_)),
      reconciler_(client, jobs_, pods_, services_, workloads_.get(), events, monitor_.get(),
                  options.reconciler, nodes_.get()) {
  jobs_.AddHandler(
      [this](kube::EventType, const kube::ObjectPtr& obj) { queue_.Add(kube::ObjectKey(*obj)); });
  auto owner = [this](kube::EventType, const kube::ObjectPtr& obj) { EnqueueOwner(obj); };
  pods_.AddHandler(owner);
  services_.AddHandler(owner);
  if (workloads_) workloads_->AddHandler(owner);
  if (nodes_)
    nodes_->AddHandler(
        [this](kube::EventType, const kube::ObjectPtr& obj) { EnqueueJobsOnNode(obj); });
}

void Controller::EnqueueJobsOnNode(const kube::ObjectPtr& node) {
  const std::string name = node->at("metadata").value("name", "");
  const bool lost = NodeHealthOf(*node).lost;
  {
    MutexLock lock(lost_mu_);
    const bool was_lost = lost_nodes_.count(name) > 0;
    if (lost)
      lost_nodes_.insert(name);
    else
      lost_nodes_.erase(name);
    if (!lost && !was_lost) return;  // a healthy node's routine update
  }
  for (const auto& pod : pods_.List())
    if (pod->value("spec", Json::object()).value("nodeName", "") == name) EnqueueOwner(pod);
}

Controller::~Controller() { Stop(); }

void Controller::EnqueueOwner(const kube::ObjectPtr& object) {
  const Json& meta = object->at("metadata");
  for (const auto& ref : meta.value("ownerReferences", Json::array())) {
    if (ref.value("controller", false) && ref.value("kind", "") == kKind)
      queue_.Add(meta.value("namespace", "") + "/" + ref.value("name", ""));
  }
}

bool Controller::Start(std::chrono::milliseconds sync_timeout) {
  jobs_.Start();
  pods_.Start();
  services_.Start();
  if (workloads_) workloads_->Start();
  if (nodes_) nodes_->Start();
  const auto deadline = std::chrono::steady_clock::now() + sync_timeout;
  for (kube::Informer* inf : {&jobs_, &pods_, &services_, workloads_.get(), nodes_.get()}) {
    if (!inf) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!inf->WaitForSync(std::max(left, std::chrono::milliseconds(1)))) {
      std::cerr << "controller: the " << inf->type().plural << " cache did not sync\n";
      return false;
    }
  }
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { Work(); });
  if (monitor_) monitor_->Start();
  ready_ = true;
  return true;
}

void Controller::Stop() {
  ready_ = false;
  if (monitor_) monitor_->Stop();
  queue_.ShutDown();
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  workers_.clear();
  jobs_.Stop();
  pods_.Stop();
  services_.Stop();
  if (workloads_) workloads_->Stop();
  if (nodes_) nodes_->Stop();
}

void Controller::Work() {
  std::string key;
  while (queue_.Get(key)) {
    auto start = std::chrono::steady_clock::now();
    ReconcileOutcome outcome;
    try {
      outcome = reconciler_.Reconcile(key);
    } catch (const std::exception& e) {
      // A bug must not kill the operator: retry with backoff, loudly.
      outcome = {ReconcileOutcome::kRetry, {}, std::string("internal error: ") + e.what()};
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    switch (outcome.kind) {
      case ReconcileOutcome::kDone:
        queue_.Forget(key);
        break;
      case ReconcileOutcome::kRequeueAfter:
        queue_.Forget(key);
        queue_.AddAfter(key, outcome.after);
        break;
      case ReconcileOutcome::kRetry:
        std::cerr << "reconcile " << key << ": " << outcome.message << " (retrying)\n";
        queue_.AddRateLimited(key);
        break;
      case ReconcileOutcome::kTerminal:
        std::cerr << "reconcile " << key << ": " << outcome.message << " (not retried)\n";
        queue_.Forget(key);
        break;
    }
    if (observer_) observer_(outcome, seconds);
    queue_.Done(key);
  }
}

}  // namespace khorovod::op
