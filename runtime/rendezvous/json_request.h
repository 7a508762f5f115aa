// JsonRequest: strict, declarative validation of a JSON request body.
//
//   std::string error;
//   auto req = JsonRequest::Parse(body, &error);      // must be a JSON object
//   if (!req) return 400 with error;
//   std::string name = req->String("name", kRequired, 253);
//   int64_t slots = req->Int("slots", kOptional, 1, 4096, /*def=*/1);
//   if (!req->Finish(&error)) return 400 with error;  // also rejects unknown fields
//
// Accessors never throw: the first problem (missing field, wrong type, value
// out of range) is remembered and reported by Finish(), which also rejects
// any field no accessor asked for. Integers must be JSON integers (5.0 and
// "5" are refused); strings are byte strings with a length cap.
//
// Thread-safety: a value; one request per object.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace khorovod::rendezvous {

class JsonRequest {
 public:
  static constexpr bool kRequired = true;
  static constexpr bool kOptional = false;

  // An empty body is read as {}. Anything but a JSON object is an error.
  static std::optional<JsonRequest> Parse(std::string_view body, std::string* error);

  std::string String(const char* field, bool required, size_t max_length, std::string def = "");
  int64_t Int(const char* field, bool required, int64_t min, int64_t max, int64_t def = 0);
  std::vector<std::string> StringArray(const char* field, bool required, size_t max_items,
                                       size_t max_length);

  // True when every accessor succeeded and no unknown field is present.
  bool Finish(std::string* error) const;

 private:
  explicit JsonRequest(nlohmann::json body) : body_(std::move(body)) {}
  const nlohmann::json* Field(const char* field, bool required);
  void Fail(std::string message);

  nlohmann::json body_;
  std::set<std::string> known_;
  std::string error_;
};

}  // namespace khorovod::rendezvous
