// Eager allreduce payloads: what a rank writes, what its peers parse, and
// the local reduction every rank runs on the same contributions.
#include "core/eager_allreduce.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace khorovod {
namespace {

Response SmallAllreduce(int64_t elements, DataType dtype = DataType::kFloat32,
                        ReduceOp op = ReduceOp::kSum) {
  Response r;
  r.op = OpType::kAllreduce;
  r.names = {"t"};
  r.dtype = dtype;
  r.reduce_op = op;
  r.sizes = {elements};
  return r;
}

PendingOp HostOp(std::vector<float>& data) {
  PendingOp op;
  op.input = TensorView{data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}, {}};
  op.output = op.input;
  return op;
}

TEST(EagerAllreduce, EligibilityDependsOnTheResponseOnly) {
  EXPECT_TRUE(EagerEligible(SmallAllreduce(4)));
  EXPECT_TRUE(EagerEligible(SmallAllreduce(0)));
  Response grouped = SmallAllreduce(4);
  grouped.group = "g";
  grouped.group_size = 2;
  EXPECT_FALSE(EagerEligible(grouped));
  Response device = SmallAllreduce(4);
  device.device = Device{DeviceKind::kCUDA, 0};
  EXPECT_FALSE(EagerEligible(device));
  Response broadcast = SmallAllreduce(4);
  broadcast.op = OpType::kBroadcast;
  EXPECT_FALSE(EagerEligible(broadcast));
  // Larger than the payload can ever hold.
  EXPECT_FALSE(EagerEligible(SmallAllreduce(static_cast<int64_t>(kEagerPayloadWords) * 2)));
}

TEST(EagerAllreduce, WrittenEntriesParseBackPrescaled) {
  std::vector<uint64_t> block(kEagerPayloadWords, 0);
  EagerPayloadWriter writer(block.data());
  std::vector<float> a{1, 2, 3}, b{10};
  Response ra = SmallAllreduce(3);
  ra.prescale = 2.0;
  ASSERT_TRUE(writer.Append(7, HostOp(a), ra));
  ASSERT_TRUE(writer.Append(300, HostOp(b), SmallAllreduce(1)));
  EXPECT_EQ(a[0], 1.0f) << "the caller's input must not be scaled in place";

  EagerEntries entries;
  ASSERT_TRUE(ParseEagerPayload(block.data(), 0, &entries).ok());
  ASSERT_EQ(entries.size(), 2u);
  ASSERT_EQ(entries.at(7).bytes, 3 * sizeof(float));
  const auto* pa = reinterpret_cast<const float*>(entries.at(7).data);
  EXPECT_EQ(pa[0], 2.0f);
  EXPECT_EQ(pa[2], 6.0f);
  EXPECT_EQ(*reinterpret_cast<const float*>(entries.at(300).data), 10.0f);
}

TEST(EagerAllreduce, AFullPayloadRefusesWithoutWriting) {
  std::vector<uint64_t> block(kEagerPayloadWords, 0);
  EagerPayloadWriter writer(block.data());
  // 100 floats take 51 words with their header: two fit, a third does not.
  std::vector<float> data(100, 1.0f);
  const Response r = SmallAllreduce(100);
  EXPECT_TRUE(writer.Append(0, HostOp(data), r));
  EXPECT_TRUE(writer.Append(1, HostOp(data), r));
  const uint64_t used = block[0];
  EXPECT_FALSE(writer.Append(2, HostOp(data), r));
  EXPECT_EQ(block[0], used);
  std::vector<float> one{5};
  EXPECT_TRUE(writer.Append(3, HostOp(one), SmallAllreduce(1))) << "a smaller entry still fits";
}

TEST(EagerAllreduce, RefusesBuffersThatDoNotMatchTheResponse) {
  std::vector<uint64_t> block(kEagerPayloadWords, 0);
  EagerPayloadWriter writer(block.data());
  std::vector<float> data{1, 2};
  PendingOp on_device = HostOp(data);
  on_device.input.device = Device{DeviceKind::kCUDA, 0};
  EXPECT_FALSE(writer.Append(0, on_device, SmallAllreduce(2)));
  EXPECT_FALSE(writer.Append(0, HostOp(data), SmallAllreduce(3)));
  EXPECT_EQ(block[0], 0u);
}

TEST(EagerAllreduce, MalformedPayloadIsAnErrorNamingTheRank) {
  std::vector<uint64_t> block(kEagerPayloadWords, 0);
  EagerEntries entries;
  block[0] = kEagerPayloadWords;  // longer than the block
  Status s = ParseEagerPayload(block.data(), 3, &entries);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("rank 3"), std::string::npos) << s.ToString();

  block[0] = 2;
  block[1] = (uint64_t{5} << 32) | 64;  // claims 8 data words, has 1
  s = ParseEagerPayload(block.data(), 1, &entries);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("slot 5"), std::string::npos) << s.ToString();
}

TEST(EagerAllreduce, ReducesInRankOrderThenAveragesAndPostscales) {
  std::vector<double> r0{1, 8}, r1{2, 4}, r2{3, 0};
  Response avg = SmallAllreduce(2, DataType::kFloat64, ReduceOp::kAverage);
  avg.postscale = 10.0;
  std::vector<double> out(2);
  ReduceEager(
      avg,
      {reinterpret_cast<const std::byte*>(r0.data()), reinterpret_cast<const std::byte*>(r1.data()),
       reinterpret_cast<const std::byte*>(r2.data())},
      out.data());
  EXPECT_DOUBLE_EQ(out[0], 20.0);
  EXPECT_DOUBLE_EQ(out[1], 40.0);

  std::vector<double> mins(2);
  ReduceEager(SmallAllreduce(2, DataType::kFloat64, ReduceOp::kMin),
              {reinterpret_cast<const std::byte*>(r0.data()),
               reinterpret_cast<const std::byte*>(r1.data())},
              mins.data());
  EXPECT_EQ(mins, (std::vector<double>{1, 4}));
}

}  // namespace
}  // namespace khorovod
