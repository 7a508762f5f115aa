// Controller: the HorovodJob control loop. Wires informers (HorovodJobs, and
// the Pods and Services labelled as the operator's) to a work queue of job
// keys, and runs N worker threads that call the Reconciler.
//
// Keys are "namespace/name" of HorovodJobs. A pod or service event enqueues
// its controller owner's key, so a job is reconciled whenever anything it
// owns changes, plus on every informer resync; so does a change of a job's
// rendezvous generation seen by the RendezvousMonitor.
//
// Thread-safety: Start/Stop from the owning thread; Ready and the metric
// accessors from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/reconciler.h"
#include "khorovod/util/mutex.h"
#include "kube/informer.h"
#include "kube/work_queue.h"

namespace khorovod::op {

struct ControllerOptions {
  std::string watch_namespace;  // "" = all namespaces
  int workers = 4;              // reconcile threads
  std::chrono::seconds resync{300};
  std::chrono::seconds watch_timeout{240};
  // Watch Nodes (cluster-wide get/list/watch) to replace the workers of a
  // lost node after runPolicy.nodeLossTimeoutSeconds (job_plan.h, 6b).
  bool watch_nodes = true;
  ReconcilerOptions reconciler;
};

// Called after each reconcile with its outcome and duration (seconds).
using ReconcileObserver = std::function<void(const ReconcileOutcome&, double seconds)>;

class Controller {
 public:
  Controller(kube::RestClient& client, kube::EventRecorder& events, ControllerOptions options);
  ~Controller();

  // Starts the informers, waits for their first list, then the workers.
  // Returns false if the caches did not sync within `sync_timeout`.
  bool Start(std::chrono::milliseconds sync_timeout);
  void Stop();
  bool Ready() const { return ready_.load(); }

  void set_observer(ReconcileObserver observer) { observer_ = std::move(observer); }
  size_t QueueDepth() const { return queue_.Depth(); }
  std::map<JobPhase, int> PhaseCounts() const { return reconciler_.PhaseCounts(); }
  GpuTotals Gpus() const { return reconciler_.Gpus(); }
  uint64_t JobListCount() const { return jobs_.list_count(); }

 private:
  void Work();
  void EnqueueOwner(const kube::ObjectPtr& object);
  // A node changed: re-reconcile the jobs with pods on it when it is lost,
  // or was lost before (it recovered).
  void EnqueueJobsOnNode(const kube::ObjectPtr& node);

  const ControllerOptions options_;
  kube::Informer jobs_;
  kube::Informer pods_;
  kube::Informer services_;
  std::unique_ptr<kube::Informer> workloads_;  // Kueue Workloads; null without --kueue
  std::unique_ptr<kube::Informer> nodes_;      // Nodes (trimmed); null without watch_nodes
  Mutex lost_mu_;
  std::set<std::string> lost_nodes_ GUARDED_BY(lost_mu_);  // nodes last seen lost
  kube::WorkQueue queue_;
  std::unique_ptr<RendezvousMonitor> monitor_;  // null with rendezvous_refresh 0
  Reconciler reconciler_;
  ReconcileObserver observer_;
  std::vector<std::thread> workers_;
  std::atomic<bool> ready_{false};
};

}  // namespace khorovod::op
