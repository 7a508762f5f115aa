// half.h: bit-exact float <-> IEEE binary16 / bfloat16 conversions with
// round-to-nearest-even. References here are computed independently (ldexp
// decoding and a nearest-value search), not with the functions under test.
#include "common/half.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

namespace khorovod {
namespace {

// Reference decoding of a binary16 pattern.
double HalfReference(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool IsBFloat16NaN(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

// Nearest pattern among the positive patterns [0, inf_pattern] by value,
// ties to the even pattern. `decode` must be monotonic over that range.
template <typename Decode>
uint16_t NearestReference(double v, uint16_t inf_pattern, Decode decode) {
  uint16_t lo = 0, hi = inf_pattern;  // decode(lo) <= v < decode(hi) unless v >= decode(hi)
  if (v >= decode(hi)) return hi;
  while (hi - lo > 1) {
    uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (decode(mid) <= v ? lo : hi) = mid;
  }
  double below = v - decode(lo), above = decode(hi) - v;
  // The largest finite value rounds to infinity from the midpoint on, as if
  // the next pattern were the finite value one ulp above.
  if (hi == inf_pattern) above = 2 * decode(lo) - decode(static_cast<uint16_t>(lo - 1)) - v;
  if (below < above) return lo;
  if (above < below) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(Half, DecodesEveryPatternLikeTheReference) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (IsHalfNaN(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), HalfReference(static_cast<uint16_t>(h))) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
  }
}

TEST(Half, EveryPatternRoundTripsAndNaNStaysNaN) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t back = FloatToHalf(HalfToFloat(static_cast<uint16_t>(h)));
    if (IsHalfNaN(static_cast<uint16_t>(h))) {
      EXPECT_TRUE(IsHalfNaN(back)) << std::hex << h << " -> " << back;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Half, TiesRoundToEvenBetweenEveryPairOfAdjacentFiniteValues) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t h = 0; h < 0x7bff; ++h) {
      const double lo = HalfReference(h), hi = HalfReference(static_cast<uint16_t>(h + 1));
      const float mid = static_cast<float>((lo + hi) / 2);  // exact: 12 significant bits
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
      const float m = sign ? -mid : mid;
      const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
      ASSERT_EQ(FloatToHalf(m), even | sign) << std::hex << h;
      ASSERT_EQ(FloatToHalf(std::nextafter(m, 0.0f)), h | sign) << std::hex << h;
      ASSERT_EQ(FloatToHalf(std::nextafter(m, sign ? -INFINITY : INFINITY)), (h + 1) | sign)
          << std::hex << h;
    }
  }
}

TEST(Half, OverflowsToInfinityFromTheMidpointAboveTheLargestFinite) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie between 0x7bff (odd) and 2^16
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(FLT_MAX), 0x7c00);
  EXPECT_EQ(FloatToHalf(-FLT_MAX), 0xfc00);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
  EXPECT_TRUE(IsHalfNaN(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  // A float NaN whose payload lies only in bits the conversion drops.
  EXPECT_TRUE(IsHalfNaN(FloatToHalf(BitsToFloat(0x7f800001u))));
}

TEST(Half, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest half subnormal
  EXPECT_EQ(FloatToHalf(tiny), 0x0001);
  EXPECT_EQ(FloatToHalf(-tiny), 0x8001);
  EXPECT_EQ(FloatToHalf(tiny / 2), 0x0000);   // tie: 0 is even
  EXPECT_EQ(FloatToHalf(-tiny / 2), 0x8000);  // keeps the sign of zero
  EXPECT_EQ(FloatToHalf(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * tiny / 2), 0x0002);              // tie between 1 and 2
  EXPECT_EQ(FloatToHalf(5 * tiny / 2), 0x0002);              // tie between 2 and 3
  EXPECT_EQ(FloatToHalf(1023 * tiny), 0x03ff);               // largest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400);  // 1023.5 ulps: tie rounds up to even
  EXPECT_EQ(FloatToHalf(FLT_TRUE_MIN), 0x0000);              // float subnormal
  EXPECT_EQ(HalfToFloat(0x0001), tiny);
  EXPECT_EQ(HalfToFloat(0x83ff), -1023 * tiny);
}

TEST(Half, SampledFloatsRoundToTheNearestHalf) {
  // Every 997th positive float pattern, plus its negation.
  for (uint64_t bits = 0; bits < 0x7f800000u; bits += 997) {
    const float f = BitsToFloat(static_cast<uint32_t>(bits));
    const uint16_t want = NearestReference(f, 0x7c00, HalfReference);
    ASSERT_EQ(FloatToHalf(f), want) << std::hex << bits;
    ASSERT_EQ(FloatToHalf(-f), want | 0x8000) << std::hex << bits;
  }
}

double BFloat16Reference(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exponent = (h >> 7) & 0xff;
  const int mantissa = h & 0x7f;
  if (exponent == 255) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

TEST(BFloat16, EveryPatternDecodesAndRoundTripsAndNaNStaysNaN) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const float f = BFloat16ToFloat(b);
    const uint16_t back = FloatToBFloat16(f);
    if (IsBFloat16NaN(b)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(IsBFloat16NaN(back)) << std::hex << h << " -> " << back;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), BFloat16Reference(b)) << std::hex << h;
    ASSERT_EQ(back, h) << std::hex << h;
  }
}

TEST(BFloat16, TiesRoundToEvenIncludingSubnormalsAndOverflow) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint32_t h = 0; h <= 0x7f7f; ++h) {  // 0x7f7f's upper neighbour is +inf (even)
      const uint32_t mid_bits = (h << 16) | 0x8000u | (static_cast<uint32_t>(sign) << 16);
      const uint16_t even = static_cast<uint16_t>(((h & 1) ? h + 1 : h) | sign);
      ASSERT_EQ(FloatToBFloat16(BitsToFloat(mid_bits)), even) << std::hex << h;
      ASSERT_EQ(FloatToBFloat16(BitsToFloat(mid_bits - 1)), h | sign) << std::hex << h;
      ASSERT_EQ(FloatToBFloat16(BitsToFloat(mid_bits + 1)), (h + 1) | sign) << std::hex << h;
    }
  }
}

TEST(BFloat16, OverflowInfinityAndNaN) {
  EXPECT_EQ(FloatToBFloat16(FLT_MAX), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-FLT_MAX), 0xff80);
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-INFINITY), 0xff80);
  EXPECT_TRUE(IsBFloat16NaN(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(IsBFloat16NaN(FloatToBFloat16(BitsToFloat(0x7f800001u))));  // payload below bit 16
  EXPECT_TRUE(IsBFloat16NaN(FloatToBFloat16(BitsToFloat(0xff800001u))));
  EXPECT_EQ(FloatToBFloat16(FLT_TRUE_MIN), 0x0000);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
}

TEST(BFloat16, SampledFloatsRoundToTheNearestBFloat16) {
  for (uint64_t bits = 0; bits < 0x7f800000u; bits += 997) {
    const float f = BitsToFloat(static_cast<uint32_t>(bits));
    const uint16_t want = NearestReference(f, 0x7f80, BFloat16Reference);
    ASSERT_EQ(FloatToBFloat16(f), want) << std::hex << bits;
    ASSERT_EQ(FloatToBFloat16(-f), want | 0x8000) << std::hex << bits;
  }
}

}  // namespace
}  // namespace khorovod
