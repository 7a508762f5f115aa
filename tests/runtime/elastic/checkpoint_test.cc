// Checkpoint files: round trip, and a truncated or foreign file refused with
// a reason instead of read as state.
#include "elastic/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace khorovod::elastic {
namespace {

std::string TempPath() {
  return ::testing::TempDir() + "/ckpt." + std::to_string(::getpid()) + "." +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

CheckpointData Sample() {
  CheckpointData d;
  d.serial = 42;
  d.counters = {{"epoch", 3}, {"step", -7}};
  d.tensors.push_back({"w", std::vector<std::byte>(1000, std::byte{0x5a})});
  d.tensors.push_back({"empty", {}});
  return d;
}

TEST(CheckpointTest, RoundTrip) {
  const std::string path = TempPath();
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  EXPECT_EQ(PeekCheckpointSerial(path), 42);
  auto back = ReadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->serial, 42);
  EXPECT_EQ(back->counters, Sample().counters);
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors[0].name, "w");
  EXPECT_EQ(back->tensors[0].bytes, Sample().tensors[0].bytes);
  EXPECT_TRUE(back->tensors[1].bytes.empty());
  std::remove(path.c_str());
}

TEST(CheckpointTest, MissingFileHasSerialZeroAndReadsAsAnError) {
  const std::string path = TempPath();
  std::remove(path.c_str());
  EXPECT_EQ(PeekCheckpointSerial(path), 0);
  EXPECT_EQ(ReadCheckpoint(path).status().code(), StatusCode::kInvalidArgument);
}

TEST(CheckpointTest, TruncatedFileIsRefused) {
  const std::string path = TempPath();
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  ASSERT_EQ(::truncate(path.c_str(), 200), 0);  // inside the tensor bytes
  auto back = ReadCheckpoint(path);
  EXPECT_EQ(back.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("truncated"), std::string::npos);
  std::remove(path.c_str());
}

TEST(CheckpointTest, ForeignFileIsRefused) {
  const std::string path = TempPath();
  std::ofstream(path) << "not a checkpoint at all, but long enough to hold a header\n";
  EXPECT_EQ(PeekCheckpointSerial(path), 0);
  EXPECT_EQ(ReadCheckpoint(path).status().code(), StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

TEST(CheckpointTest, OverwriteIsAtomicRename) {
  const std::string path = TempPath();
  CheckpointData d = Sample();
  ASSERT_TRUE(WriteCheckpoint(path, d).ok());
  d.serial = 43;
  ASSERT_TRUE(WriteCheckpoint(path, d).ok());
  EXPECT_EQ(PeekCheckpointSerial(path), 43);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace khorovod::elastic
