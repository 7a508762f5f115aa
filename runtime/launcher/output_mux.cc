#include "launcher/output_mux.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace khorovod::launcher {
namespace {

constexpr std::size_t kReadChunkBytes = 64 * 1024;
// Per service() call and stream; bounds how long one busy worker can keep
// the loop away from the others.
constexpr int kMaxReadsPerWakeup = 16;
// Enough to empty a default 64 KiB pipe even with short reads, yet finite
// when a still-running writer keeps refilling it.
constexpr int kMaxReadsWhenDraining = 64;

}  // namespace

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_line_bytes)
    : prefix_(std::move(prefix)), max_line_bytes_(std::max<std::size_t>(max_line_bytes, 1)) {}

// Built by appending: GCC 12's -Wrestrict misfires on `"[" + std::string&&`
// in Release builds, and the newcomer's first build must print no warnings.
std::string LinePrefixer::StdoutPrefix(int rank) {
  std::string prefix = "[";
  prefix += std::to_string(rank);
  prefix += "]<stdout>:";
  return prefix;
}

std::string LinePrefixer::StderrPrefix(int rank) {
  std::string prefix = "[";
  prefix += std::to_string(rank);
  prefix += "]<stderr>:";
  return prefix;
}

void LinePrefixer::emit(std::string_view line, std::string& out) const {
  out.append(prefix_);
  out.append(line);
  out.push_back('\n');
}

void LinePrefixer::feed(std::string_view data, std::string& out) {
  while (!data.empty()) {
    const auto newline = data.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(data);
      // Keep the pending tail bounded: emit over-long lines in pieces. Only
      // strictly longer tails are cut, so a line of exactly max bytes
      // followed by its newline is still a single line.
      while (partial_.size() > max_line_bytes_) {
        emit(std::string_view(partial_).substr(0, max_line_bytes_), out);
        partial_.erase(0, max_line_bytes_);
      }
      return;
    }
    std::string_view line = data.substr(0, newline);
    if (partial_.empty()) {
      // Common case: whole line inside this chunk, no copy into partial_.
      while (line.size() > max_line_bytes_) {
        emit(line.substr(0, max_line_bytes_), out);
        line.remove_prefix(max_line_bytes_);
      }
      emit(line, out);
    } else {
      partial_.append(line);
      std::string_view rest(partial_);
      while (rest.size() > max_line_bytes_) {
        emit(rest.substr(0, max_line_bytes_), out);
        rest.remove_prefix(max_line_bytes_);
      }
      emit(rest, out);
      partial_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

void LinePrefixer::finish(std::string& out) {
  if (partial_.empty()) return;
  emit(partial_, out);
  partial_.clear();
}

OutputMux::OutputMux(std::size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes), read_buffer_(kReadChunkBytes) {}

void OutputMux::AddStream(UniqueFd source, std::string prefix, int sink_fd, UniqueFd copy) {
  streams_.push_back(Stream{std::move(source), LinePrefixer(std::move(prefix), max_line_bytes_),
                            sink_fd, std::move(copy)});
}

void OutputMux::AppendPollfds(std::vector<pollfd>& fds) const {
  for (const auto& s : streams_) {
    if (s.source) fds.push_back(pollfd{s.source.get(), POLLIN, 0});
  }
}

void OutputMux::service(const std::vector<pollfd>& fds) {
  for (const auto& p : fds) {
    if ((p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
    auto it = std::find_if(streams_.begin(), streams_.end(),
                           [&](const Stream& s) { return s.source.get() == p.fd; });
    if (it != streams_.end()) pump(*it, kMaxReadsPerWakeup);
  }
  std::erase_if(streams_, [](const Stream& s) { return !s.source; });
}

void OutputMux::DrainAndCloseAll() {
  for (auto& s : streams_) {
    if (!s.source) continue;
    pump(s, kMaxReadsWhenDraining);
    if (s.source) CloseStream(s);
  }
  streams_.clear();
}

bool OutputMux::HasOpenStreams() const {
  return std::any_of(streams_.begin(), streams_.end(),
                     [](const Stream& s) { return s.source.valid(); });
}

void OutputMux::pump(Stream& stream, int max_reads) {
  std::string out;
  for (int i = 0; i < max_reads; ++i) {
    const ssize_t n = ::read(stream.source.get(), read_buffer_.data(), read_buffer_.size());
    if (n > 0) {
      out.clear();
      if (stream.copy) {
        WriteToSink(stream.copy.get(),
                    std::string(read_buffer_.data(), static_cast<std::size_t>(n)));
      }
      stream.prefixer.feed(std::string_view(read_buffer_.data(), static_cast<std::size_t>(n)), out);
      WriteToSink(stream.sink_fd, out);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    CloseStream(stream);  // EOF, or an error that makes the pipe useless
    return;
  }
}

void OutputMux::CloseStream(Stream& stream) {
  std::string out;
  stream.prefixer.finish(out);
  WriteToSink(stream.sink_fd, out);
  stream.source.reset();
  stream.copy.reset();
}

void OutputMux::WriteToSink(int sink_fd, const std::string& data) {
  if (data.empty()) return;
  if (std::find(broken_sinks_.begin(), broken_sinks_.end(), sink_fd) != broken_sinks_.end()) {
    return;
  }
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(sink_fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The launcher's own stdout may be non-blocking (inherited that way);
      // wait until it drains rather than spin or drop lines.
      pollfd p{sink_fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    // EPIPE and friends: nobody is reading the launcher's output any more.
    // Keep draining the workers' pipes (so they never block) but drop it.
    broken_sinks_.push_back(sink_fd);
    return;
  }
}

}  // namespace khorovod::launcher
