// TextWriter: see khorovod/metrics/text_writer.h.
#include "khorovod/metrics/text_writer.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace khorovod::metrics {
namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kUntyped: return "untyped";
  }
  return "untyped";
}

// HELP text escapes backslash and newline; label values also escape '"'.
std::string Escape(std::string_view s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (quote && c == '"') out += "\\\"";
    else out += c;
  }
  return out;
}

void CheckName(std::string_view name) {
  if (!TextWriter::IsValidName(name)) {
    throw std::invalid_argument("invalid Prometheus metric or label name: '" + std::string(name) + "'");
  }
}

}  // namespace

bool TextWriter::IsValidName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0))) return false;
  }
  return true;
}

std::string TextWriter::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  // Shortest representation that round-trips; integers print without a dot.
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

void TextWriter::Family(std::string_view name, MetricType type, std::string_view help) {
  CheckName(name);
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += Escape(help, /*quote=*/false);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += TypeName(type);
  out_ += '\n';
}

void TextWriter::Sample(std::string_view name, double value, const Labels& labels) {
  CheckName(name);
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [key, val] : labels) {
      CheckName(key);
      if (!first) out_ += ',';
      first = false;
      out_ += key;
      out_ += "=\"";
      out_ += Escape(val, /*quote=*/true);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += FormatValue(value);
  out_ += '\n';
}

void TextWriter::Gauge(std::string_view name, std::string_view help, double value) {
  Family(name, MetricType::kGauge, help);
  Sample(name, value);
}

void TextWriter::Counter(std::string_view name, std::string_view help, double value) {
  Family(name, MetricType::kCounter, help);
  Sample(name, value);
}

}  // namespace khorovod::metrics
