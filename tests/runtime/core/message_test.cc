// Negotiation protocol encoding: round trips of every field and rejection of
// truncated, corrupt and oversized input without crashing or over-allocating.
#include "core/message.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

// --- allocation guard ---------------------------------------------------------
// Replaces the global allocation functions of this test binary (libkhorovod's
// calls bind to them too). While an AllocationLimit is alive on a thread, any
// single allocation above the limit on that thread is recorded and refused
// with std::bad_alloc instead of being attempted.
namespace {
thread_local size_t t_alloc_limit = 0;  // 0: no limit
thread_local size_t t_largest_alloc = 0;

void* Allocate(std::size_t n) {
  if (t_alloc_limit != 0) {
    if (n > t_largest_alloc) t_largest_alloc = n;
    if (n > t_alloc_limit) throw std::bad_alloc();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

class AllocationLimit {
 public:
  explicit AllocationLimit(size_t limit) {
    t_alloc_limit = limit;
    t_largest_alloc = 0;
  }
  ~AllocationLimit() { t_alloc_limit = 0; }
  size_t largest() const { return t_largest_alloc; }
};
}  // namespace

void* operator new(std::size_t n) { return Allocate(n); }
void* operator new[](std::size_t n) { return Allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace khorovod {
namespace {

constexpr size_t kSmallAllocation = 1 << 20;

Request FullRequest(int32_t rank, const std::string& name) {
  Request q;
  q.rank = rank;
  q.op = OpType::kAlltoall;
  q.name = name;
  q.dtype = DataType::kBFloat16;
  q.reduce_op = ReduceOp::kProduct;
  q.root = -7;
  q.device = Device{DeviceKind::kCUDA, 3};
  q.shape = {4, 0, 1LL << 40, -1};
  q.prescale = 0.1;
  q.postscale = -3.5e300;
  q.splits = {1, 2, 1};
  q.group = std::string("grp\0with nul", 12);
  q.group_size = 9;
  return q;
}

Response FullResponse(const std::string& name) {
  Response p;
  p.kind = Response::Kind::kError;
  p.op = OpType::kReducescatter;
  p.names = {name, "", "second name"};
  p.dtype = DataType::kInt64;
  p.reduce_op = ReduceOp::kMax;
  p.root = 12;
  p.device = Device{DeviceKind::kCUDA, 1};
  p.prescale = -0.0;
  p.postscale = 1e-300;
  p.sizes = {5, -6, INT64_MAX, INT64_MIN};
  p.row_elements = 77;
  p.group = "g";
  p.group_size = -2;
  p.join_last_rank = 3;
  p.error_code = StatusCode::kInternal;
  p.error_message = std::string("msg with \xff bytes\n", 17);
  return p;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void ExpectSame(const Request& a, const Request& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.reduce_op, b.reduce_op);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_TRUE(SameBits(a.prescale, b.prescale));
  EXPECT_TRUE(SameBits(a.postscale, b.postscale));
  EXPECT_EQ(a.splits, b.splits);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.group_size, b.group_size);
  EXPECT_TRUE(a.SameParameters(b));
}

void ExpectSame(const Response& a, const Response& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.reduce_op, b.reduce_op);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.device, b.device);
  EXPECT_TRUE(SameBits(a.prescale, b.prescale));
  EXPECT_TRUE(SameBits(a.postscale, b.postscale));
  EXPECT_EQ(a.sizes, b.sizes);
  EXPECT_EQ(a.row_elements, b.row_elements);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.group_size, b.group_size);
  EXPECT_EQ(a.join_last_rank, b.join_last_rank);
  EXPECT_EQ(a.error_code, b.error_code);
  EXPECT_EQ(a.error_message, b.error_message);
}

TEST(Message, RequestsRoundTripEveryField) {
  std::vector<Request> in = {FullRequest(2, "layer1/weights"), Request{}, FullRequest(0, "")};
  in[1].name = "defaults";
  std::vector<Request> out = {Request{}};  // decode replaces previous contents
  ASSERT_TRUE(DecodeRequests(EncodeRequests(in), &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSame(out[i], in[i]);
  }
}

TEST(Message, ResponsesRoundTripEveryField) {
  std::vector<Response> in = {FullResponse("a"), Response{}};
  in[1].names = {"b"};
  std::vector<Response> out = {Response{}, Response{}, Response{}};
  ASSERT_TRUE(DecodeResponses(EncodeResponses(in), &out).ok());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSame(out[i], in[i]);
  }
}

TEST(Message, EmptyListsRoundTrip) {
  std::vector<Request> requests = {Request{}};
  ASSERT_TRUE(DecodeRequests(EncodeRequests({}), &requests).ok());
  EXPECT_TRUE(requests.empty());
  std::vector<Response> responses = {Response{}};
  ASSERT_TRUE(DecodeResponses(EncodeResponses({}), &responses).ok());
  EXPECT_TRUE(responses.empty());
}

TEST(Message, EveryTruncationIsRejected) {
  const std::string req = EncodeRequests({FullRequest(1, "x"), FullRequest(3, "second")});
  const std::string resp = EncodeResponses({FullResponse("x"), FullResponse("yy")});
  AllocationLimit limit(kSmallAllocation);
  for (size_t len = 0; len < req.size(); ++len) {
    std::vector<Request> out;
    EXPECT_FALSE(DecodeRequests(req.substr(0, len), &out).ok()) << "requests truncated to " << len;
  }
  for (size_t len = 0; len < resp.size(); ++len) {
    std::vector<Response> out;
    EXPECT_FALSE(DecodeResponses(resp.substr(0, len), &out).ok())
        << "responses truncated to " << len;
  }
}

TEST(Message, TrailingBytesAreRejected) {
  std::vector<Request> requests;
  EXPECT_FALSE(DecodeRequests(EncodeRequests({FullRequest(0, "a")}) + '\0', &requests).ok());
  std::vector<Response> responses;
  EXPECT_FALSE(DecodeResponses(EncodeResponses({FullResponse("a")}) + "zz", &responses).ok());
}

TEST(Message, WrongProtocolVersionIsRejected) {
  for (uint32_t version : {0u, kProtocolVersion + 1, 0xffffffffu}) {
    std::string req = EncodeRequests({FullRequest(0, "a")});
    std::string resp = EncodeResponses({FullResponse("a")});
    std::memcpy(req.data(), &version, 4);
    std::memcpy(resp.data(), &version, 4);
    std::vector<Request> q;
    std::vector<Response> p;
    EXPECT_FALSE(DecodeRequests(req, &q).ok()) << version;
    EXPECT_FALSE(DecodeResponses(resp, &p).ok()) << version;
  }
}

// Byte offsets of one request named "n": header (4 + 8), rank (4), op (1),
// name (8 + 1), dtype (1), reduce op (1), root (4), device kind (1).
constexpr size_t kReqOp = 16, kReqDtype = 26, kReqReduceOp = 27, kReqDeviceKind = 32;

// One past the last value of each wire enum (update when appending one).
constexpr uint8_t kPastLastDtype = static_cast<uint8_t>(DataType::kBool) + 1;
constexpr uint8_t kPastLastStatusCode = static_cast<uint8_t>(StatusCode::kJobFinished) + 1;
constexpr uint8_t kPastLastReduceOp = static_cast<uint8_t>(ReduceOp::kAdasum) + 1;

TEST(Message, RequestWithABadEnumValueIsRejected) {
  Request q;
  q.name = "n";
  q.op = OpType::kBroadcast;
  q.dtype = DataType::kInt8;
  q.reduce_op = ReduceOp::kMin;
  q.device.kind = DeviceKind::kCUDA;
  const std::string good = EncodeRequests({q});
  std::vector<Request> out;
  ASSERT_TRUE(DecodeRequests(good, &out).ok());
  // Guard the offsets against layout changes.
  ASSERT_EQ(good[kReqOp], static_cast<char>(OpType::kBroadcast));
  ASSERT_EQ(good[kReqDtype], static_cast<char>(DataType::kInt8));
  ASSERT_EQ(good[kReqReduceOp], static_cast<char>(ReduceOp::kMin));
  ASSERT_EQ(good[kReqDeviceKind], static_cast<char>(DeviceKind::kCUDA));
  const std::pair<size_t, uint8_t> corruptions[] = {{kReqOp, 8},
                                                    {kReqOp, 0xff},
                                                    {kReqDtype, kPastLastDtype},
                                                    {kReqDtype, 0x80},
                                                    {kReqReduceOp, kPastLastReduceOp},
                                                    {kReqDeviceKind, 2}};
  for (auto [offset, value] : corruptions) {
    std::string bad = good;
    bad[offset] = static_cast<char>(value);
    EXPECT_FALSE(DecodeRequests(bad, &out).ok()) << "offset " << offset << " = " << int{value};
  }
}

TEST(Message, ResponseWithABadEnumValueIsRejected) {
  Response p;
  p.names = {"n"};
  p.kind = Response::Kind::kError;
  p.op = OpType::kJoin;
  p.error_code = StatusCode::kStalled;
  const std::string good = EncodeResponses({p});
  std::vector<Response> out;
  ASSERT_TRUE(DecodeResponses(good, &out).ok());
  // kind at 12, op at 13, then names (8 + 8 + 1), dtype at 31, reduce op at
  // 32, root (4), device kind at 37; the error code precedes the empty
  // message's 8-byte length, the process set (4) and the empty member
  // list's 8-byte length at the end.
  const size_t code = good.size() - 21;
  ASSERT_EQ(good[12], 1);
  ASSERT_EQ(good[13], static_cast<char>(OpType::kJoin));
  ASSERT_EQ(good[code], static_cast<char>(StatusCode::kStalled));
  const std::pair<size_t, uint8_t> corruptions[] = {{12, 2},
                                                    {13, 8},
                                                    {31, kPastLastDtype},
                                                    {32, kPastLastReduceOp},
                                                    {37, 2},
                                                    {code, kPastLastStatusCode},
                                                    {code, 0xff}};
  for (auto [offset, value] : corruptions) {
    std::string bad = good;
    bad[offset] = static_cast<char>(value);
    EXPECT_FALSE(DecodeResponses(bad, &out).ok()) << "offset " << offset << " = " << int{value};
  }
}

// Runs `decode` under the allocation guard and checks it failed cleanly.
template <typename Fn>
void ExpectRejectedWithoutHugeAllocation(Fn decode, const std::string& what) {
  AllocationLimit limit(kSmallAllocation);
  bool threw = false;
  Status s;
  try {
    s = decode();
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  if (threw) {
    ADD_FAILURE() << what << ": tried to allocate " << limit.largest() << " bytes for a "
                  << "message that is only a few bytes long";
    return;
  }
  EXPECT_FALSE(s.ok()) << what;
  EXPECT_LE(limit.largest(), kSmallAllocation) << what;
}

std::string Header(uint64_t count) {
  std::string s(12, '\0');
  std::memcpy(s.data(), &kProtocolVersion, 4);
  std::memcpy(s.data() + 4, &count, 8);
  return s;
}

TEST(Message, HugeLengthPrefixesInsideARequestAreRejected) {
  // One request named "n" whose name length / shape count is overwritten.
  Request q;
  q.name = "n";
  const std::string good = EncodeRequests({q});
  const size_t name_len = 17, shape_count = 37;
  for (uint64_t n : {uint64_t{1} << 20, uint64_t{1} << 24, uint64_t{1} << 40, ~uint64_t{0}}) {
    std::string bad = good;
    std::memcpy(bad.data() + name_len, &n, 8);
    ExpectRejectedWithoutHugeAllocation(
        [&] {
          std::vector<Request> out;
          return DecodeRequests(bad, &out);
        },
        "name length " + std::to_string(n));
    bad = good;
    std::memcpy(bad.data() + shape_count, &n, 8);
    ExpectRejectedWithoutHugeAllocation(
        [&] {
          std::vector<Request> out;
          return DecodeRequests(bad, &out);
        },
        "shape count " + std::to_string(n));
  }
}

TEST(Message, HugeRequestCountIsRejectedWithoutHugeAllocation) {
  for (uint64_t n : {uint64_t{1} << 24, uint64_t{1} << 32, ~uint64_t{0}}) {
    ExpectRejectedWithoutHugeAllocation(
        [&] {
          std::vector<Request> out;
          return DecodeRequests(Header(n), &out);
        },
        "request count " + std::to_string(n));
  }
}

TEST(Message, HugeResponseCountIsRejectedWithoutHugeAllocation) {
  for (uint64_t n : {uint64_t{1} << 24, uint64_t{1} << 32, ~uint64_t{0}}) {
    ExpectRejectedWithoutHugeAllocation(
        [&] {
          std::vector<Response> out;
          return DecodeResponses(Header(n), &out);
        },
        "response count " + std::to_string(n));
  }
}

TEST(Message, HugeNameCountInAResponseIsRejectedWithoutHugeAllocation) {
  Response p;
  p.names = {"n"};
  const std::string good = EncodeResponses({p});
  for (uint64_t n : {uint64_t{1} << 24, uint64_t{1} << 40}) {
    std::string bad = good;
    std::memcpy(bad.data() + 14, &n, 8);  // names count follows kind and op
    ExpectRejectedWithoutHugeAllocation(
        [&] {
          std::vector<Response> out;
          return DecodeResponses(bad, &out);
        },
        "names count " + std::to_string(n));
  }
}

TEST(Message, SameParametersIgnoresOnlyTheRank) {
  const Request a = FullRequest(0, "t");
  Request b = a;
  b.rank = 5;
  EXPECT_TRUE(a.SameParameters(b));
  auto differs = [&](auto mutate) {
    Request c = a;
    mutate(c);
    return !a.SameParameters(c);
  };
  EXPECT_TRUE(differs([](Request& c) { c.op = OpType::kAllreduce; }));
  EXPECT_TRUE(differs([](Request& c) { c.name = "u"; }));
  EXPECT_TRUE(differs([](Request& c) { c.dtype = DataType::kFloat32; }));
  EXPECT_TRUE(differs([](Request& c) { c.reduce_op = ReduceOp::kSum; }));
  EXPECT_TRUE(differs([](Request& c) { c.root = 0; }));
  EXPECT_TRUE(differs([](Request& c) { c.device.index = 0; }));
  EXPECT_TRUE(differs([](Request& c) { c.shape.back() = 2; }));
  EXPECT_TRUE(differs([](Request& c) { c.prescale = 1; }));
  EXPECT_TRUE(differs([](Request& c) { c.postscale = 1; }));
  EXPECT_TRUE(differs([](Request& c) { c.splits.clear(); }));
  EXPECT_TRUE(differs([](Request& c) { c.group = ""; }));
  EXPECT_TRUE(differs([](Request& c) { c.group_size = 1; }));
}

TEST(Message, TotalElementsSumsSizes) {
  Response p;
  EXPECT_EQ(p.total_elements(), 0);
  p.sizes = {3, 0, 4};
  EXPECT_EQ(p.total_elements(), 7);
}

}  // namespace
}  // namespace khorovod
