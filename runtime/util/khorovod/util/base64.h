// Base64 (RFC 4648, standard alphabet, with '=' padding): the encoding of the
// binary values of the rendezvous key-value store inside JSON bodies, and of
// the certificates and keys in a kubeconfig (the operator).
//
// Decoding is strict: characters outside the alphabet, whitespace, missing or
// misplaced padding and non-zero trailing bits are rejected, so every value
// has exactly one encoding.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace khorovod {

std::string Base64Encode(std::string_view bytes);

// The decoded bytes, or nullopt when `text` is not canonical base64.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace khorovod
