#include "launcher/output_mux.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>

namespace khorovod::launcher {
namespace {

std::string FeedAll(LinePrefixer& p, const std::vector<std::string>& chunks, bool finish) {
  std::string out;
  for (const auto& c : chunks) p.feed(c, out);
  if (finish) p.finish(out);
  return out;
}

TEST(LinePrefixerTest, Prefixes) {
  EXPECT_EQ(LinePrefixer::StdoutPrefix(3), "[3]<stdout>:");
  EXPECT_EQ(LinePrefixer::StderrPrefix(12), "[12]<stderr>:");
}

TEST(LinePrefixerTest, CompleteLines) {
  LinePrefixer p("P:");
  EXPECT_EQ(FeedAll(p, {"a\nbb\n\nccc\n"}, false), "P:a\nP:bb\nP:\nP:ccc\n");
  EXPECT_FALSE(p.HasPartialLine());
}

TEST(LinePrefixerTest, LinesSplitAcrossChunksAreJoined) {
  LinePrefixer p("P:");
  std::string out;
  p.feed("hel", out);
  EXPECT_EQ(out, "");
  EXPECT_TRUE(p.HasPartialLine());
  p.feed("lo\nwor", out);
  EXPECT_EQ(out, "P:hello\n");
  p.feed("ld\n", out);
  EXPECT_EQ(out, "P:hello\nP:world\n");
}

TEST(LinePrefixerTest, ByteByByte) {
  LinePrefixer p("[0]<stdout>:");
  const std::string text = "one\ntwo\nthree";
  std::string out;
  for (char c : text) p.feed(std::string_view(&c, 1), out);
  p.finish(out);
  EXPECT_EQ(out, "[0]<stdout>:one\n[0]<stdout>:two\n[0]<stdout>:three\n");
}

TEST(LinePrefixerTest, FinishFlushesPartialLineOnlyOnce) {
  LinePrefixer p("P:");
  std::string out;
  p.feed("no newline", out);
  p.finish(out);
  p.finish(out);
  EXPECT_EQ(out, "P:no newline\n");
}

TEST(LinePrefixerTest, FinishWithoutPartialAddsNothing) {
  LinePrefixer p("P:");
  EXPECT_EQ(FeedAll(p, {"x\n"}, true), "P:x\n");
  LinePrefixer empty("P:");
  EXPECT_EQ(FeedAll(empty, {}, true), "");
}

TEST(LinePrefixerTest, OverlongLinesAreEmittedInBoundedPieces) {
  LinePrefixer p("P:", 4);
  // Without a newline the pending tail never exceeds the limit.
  std::string out;
  p.feed("abcdefghij", out);
  EXPECT_EQ(out, "P:abcd\nP:efgh\n");
  p.feed("\n", out);
  EXPECT_EQ(out, "P:abcd\nP:efgh\nP:ij\n");
  // A long line inside one chunk is cut the same way.
  LinePrefixer q("P:", 4);
  EXPECT_EQ(FeedAll(q, {"abcdefghij\n"}, false), "P:abcd\nP:efgh\nP:ij\n");
}

TEST(LinePrefixerTest, LineOfExactlyMaxBytesIsNotSplit) {
  LinePrefixer p("P:", 4);
  EXPECT_EQ(FeedAll(p, {"abcd", "\n", "efgh\n"}, true), "P:abcd\nP:efgh\n");
}

// OutputMux over real pipes: two writers with interleaved partial lines
// must come out as whole prefixed lines on one sink.
TEST(OutputMuxTest, MergesPipesIntoWholeLines) {
  int a[2], b[2], sink[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(sink, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd a_write(a[1]), b_write(b[1]), sink_read(sink[0]), sink_write(sink[1]);

  OutputMux mux;
  mux.AddStream(UniqueFd(a[0]), "[0]:", sink_write.get());
  mux.AddStream(UniqueFd(b[0]), "[1]:", sink_write.get());

  auto service_once = [&] {
    std::vector<pollfd> fds;
    mux.AppendPollfds(fds);
    ASSERT_GE(::poll(fds.data(), fds.size(), 5000), 0);
    mux.service(fds);
  };
  ASSERT_EQ(::write(a_write.get(), "al", 2), 2);
  ASSERT_EQ(::write(b_write.get(), "bo", 2), 2);
  service_once();  // both pipes are readable already, so this does not block
  ASSERT_EQ(::write(a_write.get(), "pha\nrest", 8), 8);
  ASSERT_EQ(::write(b_write.get(), "b\n", 2), 2);
  a_write.reset();
  b_write.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (mux.HasOpenStreams() && std::chrono::steady_clock::now() < deadline) service_once();
  EXPECT_FALSE(mux.HasOpenStreams());

  std::string out(256, '\0');
  const ssize_t n = ::read(sink_read.get(), out.data(), out.size());
  ASSERT_GT(n, 0);
  out.resize(static_cast<std::size_t>(n));
  // Order between the two writers is not specified; line integrity is.
  EXPECT_NE(out.find("[0]:alpha\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[0]:rest\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[1]:bob\n"), std::string::npos) << out;
  EXPECT_EQ(out.size(), std::string("[0]:alpha\n[0]:rest\n[1]:bob\n").size()) << out;
  EXPECT_LT(out.find("[0]:alpha\n"), out.find("[0]:rest\n"));
}

TEST(OutputMuxTest, DrainAndCloseAllFlushesBufferedData) {
  int a[2], sink[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC | O_NONBLOCK), 0);
  ASSERT_EQ(::pipe2(sink, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd a_write(a[1]), sink_read(sink[0]), sink_write(sink[1]);
  OutputMux mux;
  mux.AddStream(UniqueFd(a[0]), "P:", sink_write.get());
  // The writer stays open: drain must not wait for EOF.
  ASSERT_EQ(::write(a_write.get(), "x\ny", 3), 3);
  mux.DrainAndCloseAll();
  EXPECT_FALSE(mux.HasOpenStreams());
  std::string out(64, '\0');
  const ssize_t n = ::read(sink_read.get(), out.data(), out.size());
  ASSERT_GT(n, 0);
  out.resize(static_cast<std::size_t>(n));
  EXPECT_EQ(out, "P:x\nP:y\n");
}

}  // namespace
}  // namespace khorovod::launcher
