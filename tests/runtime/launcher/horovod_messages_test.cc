// horovodrun's failure wording, which Horovod's elastic tests match.
#include "launcher/horovod_messages.h"

#include <gtest/gtest.h>

namespace khorovod::launcher {
namespace {

TEST(HorovodMessages, ResetLimitIsHorovodsConstant) {
  EXPECT_EQ(ResetLimitExceededMessage(3),
            "Horovod was shutdown because number of resets during elastic job exceeded limit: 3");
}

TEST(HorovodMessages, ProcessesFailedStartsWithHorovodsSentence) {
  const std::string m = ProcessesFailedMessage("worker 2 on 127.0.0.1", 1);
  EXPECT_EQ(m.rfind("Horovod detected that one or more processes exited with non-zero status", 0),
            0u)
      << m;
  EXPECT_NE(m.find("Process name: worker 2 on 127.0.0.1 Exit code: 1"), std::string::npos) << m;
}

}  // namespace
}  // namespace khorovod::launcher
