#include "backend/shm/path_trial.h"

namespace khorovod::shm {

PathTrial::Path PathTrial::Next() const {
  if (verdict_) return *verdict_;
  if (ran_ < kWarmups) return ran_ % 2 ? Path::kFlat : Path::kHierarchical;
  // ABBA: trials 0, 3, 4, 7, ... hierarchical; 1, 2, 5, 6, ... flat.
  const int i = (ran_ - kWarmups) % 4;
  return i == 0 || i == 3 ? Path::kHierarchical : Path::kFlat;
}

void PathTrial::Record(Path path, size_t bytes, double seconds) {
  if (verdict_ || ran_ >= kWarmups + kTrials) return;
  if (ran_++ < kWarmups) return;
  const size_t at = path == Path::kFlat ? 0 : 2;
  sums_[at] += seconds;
  sums_[at + 1] += static_cast<double>(bytes);
}

bool PathTrial::AgreementDue() const { return !verdict_ && ran_ >= kWarmups + kTrials; }

void PathTrial::Agree(const Sums& world) {
  // Seconds per byte; a path with no bytes (cannot happen after a full
  // trial) never wins.
  auto rate = [](double seconds, double bytes) { return bytes > 0 ? seconds / bytes : 1e300; };
  const double flat = rate(world[0], world[1]), hierarchical = rate(world[2], world[3]);
  verdict_ = hierarchical < kHierarchicalMargin * flat ? Path::kHierarchical : Path::kFlat;
}

const char* PathTrial::Name(Path path) {
  return path == Path::kFlat ? "the flat ring" : "the hierarchical path";
}

}  // namespace khorovod::shm
