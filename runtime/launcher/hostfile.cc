#include "launcher/hostfile.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace khorovod::launcher {
namespace {

// "host slots=N" -> "host:N", or an error message.
StatusOr<std::string> ParseLine(const std::string& line) {
  std::istringstream words(line);
  std::string host;
  std::string slots;
  std::string extra;
  words >> host >> slots >> extra;
  if (host.empty() || slots.rfind("slots=", 0) != 0 || !extra.empty()) {
    return Status::InvalidArgument("expected '<host> slots=<N>', got '" + line + "'");
  }
  const std::string n = slots.substr(6);
  int value = 0;
  const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
  if (ec != std::errc() || end != n.data() + n.size() || value < 1 || value > 1000000) {
    return Status::InvalidArgument("slot count must be 1..1000000, got '" + n + "'");
  }
  return host + ":" + n;
}

}  // namespace

StatusOr<std::string> ParseHostfile(const std::string& text, const std::string& name_for_errors) {
  std::istringstream lines(text);
  std::string line;
  std::string hosts;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    StatusOr<std::string> entry = ParseLine(line);
    if (!entry.ok()) {
      return Status::InvalidArgument("--hostfile " + name_for_errors + ":" +
                                     std::to_string(number) + ": " + entry.status().message());
    }
    hosts += (hosts.empty() ? "" : ",") + *entry;
  }
  if (hosts.empty()) return Status::InvalidArgument("--hostfile " + name_for_errors + ": no hosts");
  return hosts;
}

StatusOr<std::string> HostfileToHosts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("--hostfile " + path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseHostfile(text.str(), path);
}

}  // namespace khorovod::launcher
