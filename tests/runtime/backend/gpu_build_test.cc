// What a GPU-enabled build must do on any machine: register both device
// backends, and on a machine without a usable GPU or driver (CI) refuse to
// create them with a clear FAILED_PRECONDITION instead of crashing. On a GPU
// machine the second test checks that a pinned ordinal that does not exist
// is rejected.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/registry.h"
#include "test_util.h"

#ifdef KHOROVOD_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace khorovod {
namespace {

#ifdef KHOROVOD_HAVE_NCCL

bool HasName(const std::string& n) {
  auto names = BackendRegistry::Names();
  return std::find(names.begin(), names.end(), n) != names.end();
}

bool GpuPresent() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(GpuBuild, DeviceBackendsAreRegistered) {
  EXPECT_TRUE(HasName("nccl"));
  EXPECT_TRUE(HasName("staging"));
  EXPECT_TRUE(HasName("gloo"));
}

TEST(GpuBuild, CreationFailsCleanly) {
  Config config;  // size 1: no Gloo context needed
  if (GpuPresent()) {
    config.gpu_device = 4096;
    for (const char* name : {"nccl", "staging"}) {
      auto b = BackendRegistry::Create(name, BackendInit{&config, nullptr});
      ASSERT_FALSE(b.ok()) << name;
      EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument) << b.status();
      EXPECT_TRUE(testing::HasSubstr(b.status().message(), "KHOROVOD_GPU_DEVICE=4096"));
    }
    return;
  }
  for (const char* name : {"nccl", "staging"}) {
    auto b = BackendRegistry::Create(name, BackendInit{&config, nullptr});
    ASSERT_FALSE(b.ok()) << name;
    EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition) << b.status();
    EXPECT_TRUE(testing::HasSubstr(b.status().message(), "no usable CUDA device"));
  }
}

#else

TEST(GpuBuild, NoDeviceBackendsWithoutCuda) {
  for (const std::string& n : BackendRegistry::Names()) {
    EXPECT_NE(n, "nccl");
    EXPECT_NE(n, "staging");
  }
}

#endif

}  // namespace
}  // namespace khorovod
