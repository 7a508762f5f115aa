#include "kube/api_status.h"

#include <nlohmann/json.hpp>

namespace khorovod::kube {

const char* ApiCodeName(ApiCode code) {
  switch (code) {
    case ApiCode::kOk:
      return "OK";
    case ApiCode::kBadRequest:
      return "BadRequest";
    case ApiCode::kUnauthorized:
      return "Unauthorized";
    case ApiCode::kForbidden:
      return "Forbidden";
    case ApiCode::kNotFound:
      return "NotFound";
    case ApiCode::kConflict:
      return "Conflict";
    case ApiCode::kAlreadyExists:
      return "AlreadyExists";
    case ApiCode::kGone:
      return "Gone";
    case ApiCode::kInvalid:
      return "Invalid";
    case ApiCode::kTooManyRequests:
      return "TooManyRequests";
    case ApiCode::kUnavailable:
      return "Unavailable";
    case ApiCode::kOther:
      return "Other";
  }
  return "Unknown";
}

ApiStatus ApiStatus::FromHttp(int http_status, const std::string& body) {
  if (http_status >= 200 && http_status < 300) return Ok();
  std::string message;
  std::string reason;
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    message = parsed.value("message", "");
    reason = parsed.value("reason", "");
  }
  if (message.empty()) message = body.substr(0, 512);
  ApiCode code = ApiCode::kOther;
  switch (http_status) {
    case 400:
      code = ApiCode::kBadRequest;
      break;
    case 401:
      code = ApiCode::kUnauthorized;
      break;
    case 403:
      code = ApiCode::kForbidden;
      break;
    case 404:
      code = ApiCode::kNotFound;
      break;
    case 409:
      code = reason == "AlreadyExists" ? ApiCode::kAlreadyExists : ApiCode::kConflict;
      break;
    case 410:
      code = ApiCode::kGone;
      break;
    case 422:
      code = ApiCode::kInvalid;
      break;
    case 429:
      code = ApiCode::kTooManyRequests;
      break;
    default:
      if (http_status >= 500) code = ApiCode::kUnavailable;
  }
  return {code, http_status, message};
}

std::string ApiStatus::ToString() const {
  if (ok()) return "OK";
  std::string out = ApiCodeName(code_);
  if (http_status_ != 0) out += " (HTTP " + std::to_string(http_status_) + ")";
  return out + ": " + message_;
}

}  // namespace khorovod::kube
