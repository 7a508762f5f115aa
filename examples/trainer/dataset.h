// A synthetic classification data set the example generates itself: a
// mixture of Gaussian blobs, one per class, in `features` dimensions. The
// same seed gives the same data on every rank, so ranks split it among
// themselves without shipping files.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace khorovod::example {

struct Dataset {
  int features = 0;
  int classes = 0;
  std::vector<float> x;  // samples x features, row-major
  std::vector<int> y;    // class of each sample

  int64_t size() const { return static_cast<int64_t>(y.size()); }
  const float* row(int64_t i) const { return x.data() + i * features; }
};

Dataset MakeBlobs(int64_t samples, int features, int classes, uint64_t seed);

}  // namespace khorovod::example
