// A two-layer perceptron (features -> hidden tanh -> classes softmax) with
// cross-entropy loss and SGD with momentum: small enough to read, real
// enough that its loss goes down and its gradients must be averaged.
//
// Thread-safety: none; one instance per training loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataset.h"

namespace khorovod::example {

struct Parameters {
  std::vector<float> w1, b1, w2, b2;
};

class Mlp {
 public:
  Mlp(int features, int hidden, int classes, uint64_t seed);

  // Loss and accuracy over samples [begin, end) of `data` (wrapping around),
  // accumulating gradients into grads() when `backward`.
  struct BatchResult {
    double loss = 0;
    double accuracy = 0;
  };
  BatchResult Step(const Dataset& data, int64_t begin, int64_t count, bool backward);
  BatchResult Evaluate(const Dataset& data);

  // params -= lr * velocity, velocity = momentum * velocity + grads.
  void ApplySgd(float lr, float momentum);
  void ZeroGrads();

  Parameters& params() { return params_; }
  Parameters& grads() { return grads_; }
  Parameters& velocity() { return velocity_; }
  // FNV-1a over the parameter bytes: equal on every rank iff weights agree.
  uint64_t Checksum() const;

 private:
  int features_, hidden_, classes_;
  Parameters params_, grads_, velocity_;
  std::vector<float> h_, p_;  // scratch: hidden activations and softmax output
};

}  // namespace khorovod::example
