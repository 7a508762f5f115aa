// The shapes of ResNet-50's 161 trainable parameter tensors (torchvision
// layout: conv weights, batch-norm gamma and beta, the final fully connected
// layer), generated from the architecture rather than typed in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace khorovod::bench {

struct NamedShape {
  std::string name;
  std::vector<int64_t> shape;
};

inline std::vector<NamedShape> ResNet50ParameterShapes() {
  std::vector<NamedShape> out;
  auto bn = [&](const std::string& name, int64_t c) {
    out.push_back({name + ".weight", {c}});
    out.push_back({name + ".bias", {c}});
  };
  out.push_back({"conv1.weight", {64, 3, 7, 7}});
  bn("bn1", 64);
  const int64_t planes_per_stage[] = {64, 128, 256, 512};
  const int blocks_per_stage[] = {3, 4, 6, 3};
  int64_t inplanes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = planes_per_stage[stage];
    for (int block = 0; block < blocks_per_stage[stage]; ++block) {
      const std::string p = "layer" + std::to_string(stage + 1) + "." + std::to_string(block);
      out.push_back({p + ".conv1.weight", {planes, inplanes, 1, 1}});
      bn(p + ".bn1", planes);
      out.push_back({p + ".conv2.weight", {planes, planes, 3, 3}});
      bn(p + ".bn2", planes);
      out.push_back({p + ".conv3.weight", {planes * 4, planes, 1, 1}});
      bn(p + ".bn3", planes * 4);
      if (block == 0) {
        out.push_back({p + ".downsample.0.weight", {planes * 4, inplanes, 1, 1}});
        bn(p + ".downsample.1", planes * 4);
      }
      inplanes = planes * 4;
    }
  }
  out.push_back({"fc.weight", {1000, 2048}});
  out.push_back({"fc.bias", {1000}});
  return out;
}

}  // namespace khorovod::bench
