// Output mux: merge the workers' output into the launcher's, line by line.
//
// Each worker's stdout and stderr arrive on their own pipe. Every complete
// line is re-emitted with a horovodrun-style prefix:
//     [<rank>]<stdout>:<line>      on the launcher's stdout
//     [<rank>]<stderr>:<line>      on the launcher's stderr
// Lines are only ever written whole (one write(2) call sequence per batch,
// from one thread), so lines of different ranks never interleave mid-line.
//
// Memory is bounded: reads use a fixed-size buffer, and a line that grows
// past `max_line_bytes` without a newline is emitted in prefixed pieces of
// that size rather than buffered without limit. A final line lacking its
// newline is emitted (with one added) when the stream reaches EOF.
//
// Thread-safety: none. One thread owns the mux and calls everything.
#pragma once

#include <poll.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/unique_fd.h"

namespace khorovod::launcher {

inline constexpr std::size_t kDefaultMaxLineBytes = 64 * 1024;

// Pure line splitter/prefixer for one stream.
class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix, std::size_t max_line_bytes = kDefaultMaxLineBytes);

  // Appends "<prefix><line>\n" to `out` for every line completed by `data`;
  // keeps the unfinished tail for the next call.
  void feed(std::string_view data, std::string& out);
  // Emits the unfinished tail, if any, as a last line (end of stream).
  void finish(std::string& out);

  bool HasPartialLine() const { return !partial_.empty(); }
  const std::string& prefix() const { return prefix_; }

  static std::string StdoutPrefix(int rank);  // "[<rank>]<stdout>:"
  static std::string StderrPrefix(int rank);  // "[<rank>]<stderr>:"

 private:
  void emit(std::string_view line, std::string& out) const;

  std::string prefix_;
  std::size_t max_line_bytes_;
  std::string partial_;
};

// Reads a set of worker pipes and writes prefixed lines to sink descriptors.
class OutputMux {
 public:
  explicit OutputMux(std::size_t max_line_bytes = kDefaultMaxLineBytes);

  // Takes ownership of `source` (should be O_NONBLOCK). `sink_fd` is not
  // owned and must outlive the mux. When `copy` is open (owned), the
  // stream's bytes are also written to it unchanged, without the prefix
  // (khorovodrun --output-filename).
  void AddStream(UniqueFd source, std::string prefix, int sink_fd, UniqueFd copy = UniqueFd());

  // Appends a POLLIN entry for every stream not yet at EOF.
  void AppendPollfds(std::vector<pollfd>& fds) const;
  // Handles the poll results for this mux's descriptors (others ignored):
  // reads what is available, writes complete lines, closes streams at EOF.
  void service(const std::vector<pollfd>& fds);
  // Reads whatever is still buffered in every open pipe without waiting,
  // flushes partial lines and closes all streams. Used when the launcher
  // stops waiting for EOF (e.g. a worker's descendant holds a pipe open).
  void DrainAndCloseAll();

  bool HasOpenStreams() const;

 private:
  struct Stream {
    UniqueFd source;
    LinePrefixer prefixer;
    int sink_fd;
    UniqueFd copy;
  };
  // Reads until EAGAIN/EOF, at most `max_reads` chunks so one chatty
  // worker cannot starve the others (or the signal pipe).
  void pump(Stream& stream, int max_reads);
  void CloseStream(Stream& stream);
  void WriteToSink(int sink_fd, const std::string& data);

  std::size_t max_line_bytes_;
  std::vector<Stream> streams_;
  std::vector<char> read_buffer_;
  std::vector<int> broken_sinks_;  // sinks that returned EPIPE/EBADF: drop output
};

}  // namespace khorovod::launcher
