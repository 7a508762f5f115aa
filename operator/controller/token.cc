#include "controller/token.h"

#include "khorovod/util/random_hex.h"

namespace khorovod::op {

std::optional<std::string> NewToken() {
  StatusOr<std::string> hex = RandomHex(64);
  if (!hex.ok()) return std::nullopt;
  return *hex;
}

}  // namespace khorovod::op
