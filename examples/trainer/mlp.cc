#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace khorovod::example {
namespace {

void Resize(Parameters& p, int features, int hidden, int classes) {
  p.w1.assign(static_cast<size_t>(hidden) * features, 0.0f);
  p.b1.assign(hidden, 0.0f);
  p.w2.assign(static_cast<size_t>(classes) * hidden, 0.0f);
  p.b2.assign(classes, 0.0f);
}

template <typename Fn>
void ForEach(Parameters& a, Parameters& b, Fn fn) {
  for (auto [x, y] : {std::pair{&a.w1, &b.w1}, std::pair{&a.b1, &b.b1}, std::pair{&a.w2, &b.w2},
                      std::pair{&a.b2, &b.b2}}) {
    for (size_t i = 0; i < x->size(); ++i) fn((*x)[i], (*y)[i]);
  }
}

}  // namespace

Mlp::Mlp(int features, int hidden, int classes, uint64_t seed)
    : features_(features), hidden_(hidden), classes_(classes) {
  Resize(params_, features, hidden, classes);
  Resize(grads_, features, hidden, classes);
  Resize(velocity_, features, hidden, classes);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> init(0.0f, 1.0f);
  for (float& w : params_.w1) w = init(rng) / std::sqrt(static_cast<float>(features));
  for (float& w : params_.w2) w = init(rng) / std::sqrt(static_cast<float>(hidden));
  h_.resize(hidden);
  p_.resize(classes);
}

Mlp::BatchResult Mlp::Step(const Dataset& data, int64_t begin, int64_t count, bool backward) {
  BatchResult r;
  if (count == 0 || data.size() == 0) return r;
  const float inv = 1.0f / static_cast<float>(count);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = (begin + k) % data.size();
    const float* x = data.row(i);
    for (int j = 0; j < hidden_; ++j) {
      float a = params_.b1[j];
      for (int f = 0; f < features_; ++f) a += params_.w1[j * features_ + f] * x[f];
      h_[j] = std::tanh(a);
    }
    float max_logit = -INFINITY;
    for (int c = 0; c < classes_; ++c) {
      float z = params_.b2[c];
      for (int j = 0; j < hidden_; ++j) z += params_.w2[c * hidden_ + j] * h_[j];
      p_[c] = z;
      max_logit = std::max(max_logit, z);
    }
    float sum = 0;
    for (float& z : p_) sum += (z = std::exp(z - max_logit));
    for (float& z : p_) z /= sum;
    const int label = data.y[i];
    r.loss += -std::log(std::max(p_[label], 1e-12f));
    r.accuracy += (std::max_element(p_.begin(), p_.end()) - p_.begin()) == label ? 1.0 : 0.0;
    if (!backward) continue;
    // dL/dz = p - onehot; back through w2 and tanh.
    for (int c = 0; c < classes_; ++c) {
      const float dz = (p_[c] - (c == label ? 1.0f : 0.0f)) * inv;
      grads_.b2[c] += dz;
      for (int j = 0; j < hidden_; ++j) grads_.w2[c * hidden_ + j] += dz * h_[j];
    }
    for (int j = 0; j < hidden_; ++j) {
      float dh = 0;
      for (int c = 0; c < classes_; ++c) {
        dh += (p_[c] - (c == label ? 1.0f : 0.0f)) * inv * params_.w2[c * hidden_ + j];
      }
      const float da = dh * (1.0f - h_[j] * h_[j]);
      grads_.b1[j] += da;
      for (int f = 0; f < features_; ++f) grads_.w1[j * features_ + f] += da * x[f];
    }
  }
  r.loss /= static_cast<double>(count);
  r.accuracy /= static_cast<double>(count);
  return r;
}

Mlp::BatchResult Mlp::Evaluate(const Dataset& data) { return Step(data, 0, data.size(), false); }

void Mlp::ApplySgd(float lr, float momentum) {
  ForEach(velocity_, grads_, [momentum](float& v, float& g) { v = momentum * v + g; });
  ForEach(params_, velocity_, [lr](float& p, float& v) { p -= lr * v; });
}

void Mlp::ZeroGrads() {
  ForEach(grads_, grads_, [](float& g, float&) { g = 0.0f; });
}

uint64_t Mlp::Checksum() const {
  uint64_t h = 1469598103934665603ull;
  for (const auto* v : {&params_.w1, &params_.b1, &params_.w2, &params_.b2}) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(v->data());
    for (size_t i = 0; i < v->size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  }
  return h;
}

}  // namespace khorovod::example
