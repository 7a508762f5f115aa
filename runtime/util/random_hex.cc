#include "khorovod/util/random_hex.h"

#include <cstdint>
#include <exception>
#include <random>

namespace khorovod {

StatusOr<std::string> RandomHex(size_t digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  try {
    std::random_device rd;
    std::string out;
    out.reserve(digits);
    // Each draw gives 32 random bits: eight digits.
    while (out.size() < digits) {
      uint32_t bits = rd();
      for (int i = 0; i < 8 && out.size() < digits; ++i, bits >>= 4)
        out.push_back(kHex[bits & 0xF]);
    }
    return out;
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("no random source: ") + e.what());
  }
}

}  // namespace khorovod
