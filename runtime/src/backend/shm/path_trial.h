// PathTrial: which path the shm backend's large cross-host allreduces take,
// the hierarchical one or Gloo's flat ring, chosen by timing both on the
// job's own allreduces.
//
// Across hosts the hierarchical path sends 2(h-1)/h of a tensor over each
// host's link where a host-major flat ring of n ranks sends 2(n-1)/n, but
// its chunks are not pipelined and its shared-memory copies cost CPU. So
// which one wins on a large tensor depends on the links, which no static
// rule sees: at 3 hosts x 2 the hierarchical path was 1.1-1.2x faster on
// 1 Gbit/s links and 0.8-0.9x on 10 Gbit/s ones (docs/benchmarks.md).
//
// The first large allreduces therefore alternate the two paths: kWarmups
// untimed (one per path: first-touch faults of the segment and of the
// ring's scratch, connections' first bytes), then kTrials timed in ABBA
// order (H F F H H F F H ...: a step's first and later rounds, which differ
// in size and in how much compute competes with them, fall to both paths
// alike). The totals of seconds and bytes are summed over every rank by one
// small allreduce (the caller's), so that every rank decides alike, and the
// hierarchical path wins only when its seconds per byte are below
// kHierarchicalMargin times the flat ring's: the flat ring, Horovod's
// default, keeps a near tie, whose sign noise decides. The verdict holds
// until the backend is destroyed: a re-formed world, whose layout and links
// may differ, starts a new trial.
//
// Contract: every rank of a backend calls Next and Record in the same
// sequence (its large allreduces, which all ranks run alike), so Next
// returns the same path on every rank; when AgreementDue(), the caller
// allreduces (sum) Sums() over those ranks and passes the result to Agree
// before its next large allreduce.
//
// Thread-safety: none; the backend's one thread (the runtime's background
// thread) owns it.
#pragma once

#include <array>
#include <cstddef>
#include <optional>

namespace khorovod::shm {

class PathTrial {
 public:
  enum class Path { kFlat, kHierarchical };
  // Large allreduces run before the timed ones, one on each path.
  static constexpr int kWarmups = 2;
  // Large allreduces timed before the verdict, half on each path.
  static constexpr int kTrials = 12;
  // The hierarchical path's seconds per byte must be below this fraction
  // of the flat ring's.
  static constexpr double kHierarchicalMargin = 0.95;
  // Seconds and bytes of each path: {flat s, flat B, hierarchical s, hierarchical B}.
  using Sums = std::array<double, 4>;

  // The path of the next large allreduce: the trial's schedule, then the verdict.
  Path Next() const;
  // Times one large allreduce taken on `path` (a warm-up's is dropped;
  // ignored once decided).
  void Record(Path path, size_t bytes, double seconds);
  // Every trial is recorded and the world's sums are not yet agreed.
  bool AgreementDue() const;
  const Sums& sums() const { return sums_; }
  // Decides from the sums added over every rank.
  void Agree(const Sums& world);
  std::optional<Path> verdict() const { return verdict_; }

  static const char* Name(Path path);

 private:
  int ran_ = 0;  // warm-ups and trials recorded
  Sums sums_{};
  std::optional<Path> verdict_;
};

}  // namespace khorovod::shm
