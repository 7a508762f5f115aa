// Conversions between float and the two 16-bit float formats (IEEE binary16
// and bfloat16), bit-exact with round-to-nearest-even, so that every rank
// reduces 16-bit tensors to the same bits.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace khorovod {

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float BFloat16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToBFloat16(float f) {
  uint32_t bits = FloatToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal half: value = mantissa * 2^-24, exact in float.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t FloatToHalf(float f) {
  uint32_t bits = FloatToBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs_bits >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: scale into the integer mantissa and round
    // to nearest even with the FPU (exact: 2^24 scaling of a float < 2^-14).
    float scaled = BitsToFloat(abs_bits) * 16777216.0f;  // * 2^24
    uint32_t m = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t rounding = 0xfffu + ((abs_bits >> 13) & 1u);
  abs_bits += rounding;
  return static_cast<uint16_t>(sign | ((abs_bits - (112u << 23)) >> 13));
}

}  // namespace khorovod
