#include "dataset.h"

#include <random>

namespace khorovod::example {

Dataset MakeBlobs(int64_t samples, int features, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  // Class centres far enough apart to be learnable, close enough that the
  // loss does not drop to zero in a few steps.
  std::vector<float> centres(static_cast<size_t>(classes) * features);
  for (float& c : centres) c = 0.6f * unit(rng);
  Dataset d;
  d.features = features;
  d.classes = classes;
  d.x.resize(static_cast<size_t>(samples) * features);
  d.y.resize(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) {
    const int label = static_cast<int>(rng() % static_cast<uint64_t>(classes));
    d.y[i] = label;
    for (int f = 0; f < features; ++f) {
      d.x[i * features + f] = centres[label * features + f] + 1.0f * unit(rng);
    }
  }
  return d;
}

}  // namespace khorovod::example
