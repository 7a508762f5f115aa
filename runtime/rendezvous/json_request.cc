#include "json_request.h"

#include <limits>

namespace khorovod::rendezvous {

std::optional<JsonRequest> JsonRequest::Parse(std::string_view body, std::string* error) {
  if (body.empty()) return JsonRequest(nlohmann::json::object());
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    *error = "the request body is not valid JSON";
    return std::nullopt;
  }
  if (!parsed.is_object()) {
    *error = "the request body must be a JSON object";
    return std::nullopt;
  }
  return JsonRequest(std::move(parsed));
}

void JsonRequest::Fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

const nlohmann::json* JsonRequest::Field(const char* field, bool required) {
  known_.insert(field);
  auto it = body_.find(field);
  if (it == body_.end()) {
    if (required) Fail(std::string("missing required field '") + field + "'");
    return nullptr;
  }
  return &*it;
}

std::string JsonRequest::String(const char* field, bool required, size_t max_length,
                                std::string def) {
  const nlohmann::json* v = Field(field, required);
  if (!v) return def;
  if (!v->is_string()) {
    Fail(std::string("field '") + field + "' must be a string");
    return def;
  }
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_length) {
    Fail(std::string("field '") + field + "' is longer than " + std::to_string(max_length) +
         " bytes");
    return def;
  }
  return s;
}

int64_t JsonRequest::Int(const char* field, bool required, int64_t min, int64_t max, int64_t def) {
  const nlohmann::json* v = Field(field, required);
  if (!v) return def;
  std::string range_error = std::string("field '") + field + "' must be between " +
                            std::to_string(min) + " and " + std::to_string(max);
  int64_t i = 0;
  if (v->is_number_unsigned()) {
    auto u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(range_error);
      return def;
    }
    i = static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    i = v->get<int64_t>();
  } else {
    Fail(std::string("field '") + field + "' must be an integer");
    return def;
  }
  if (i < min || i > max) {
    Fail(range_error);
    return def;
  }
  return i;
}

std::vector<std::string> JsonRequest::StringArray(const char* field, bool required,
                                                  size_t max_items, size_t max_length) {
  const nlohmann::json* v = Field(field, required);
  if (!v) return {};
  if (!v->is_array()) {
    Fail(std::string("field '") + field + "' must be an array of strings");
    return {};
  }
  if (v->size() > max_items) {
    Fail(std::string("field '") + field + "' has more than " + std::to_string(max_items) +
         " items");
    return {};
  }
  std::vector<std::string> out;
  for (const auto& item : *v) {
    if (!item.is_string() || item.get_ref<const std::string&>().size() > max_length) {
      Fail(std::string("field '") + field + "' must hold strings of at most " +
           std::to_string(max_length) + " bytes");
      return {};
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

bool JsonRequest::Finish(std::string* error) const {
  if (!error_.empty()) {
    *error = error_;
    return false;
  }
  for (const auto& [key, value] : body_.items()) {
    if (!known_.count(key)) {
      *error = "unknown field '" + key + "'";
      return false;
    }
  }
  return true;
}

}  // namespace khorovod::rendezvous
