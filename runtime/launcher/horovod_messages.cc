#include "launcher/horovod_messages.h"

namespace khorovod::launcher {

std::string ResetLimitExceededMessage(int limit) {
  return "Horovod was shutdown because number of resets during elastic job exceeded limit: " +
         std::to_string(limit);
}

std::string ProcessesFailedMessage(const std::string& process, int exit_code) {
  return "Horovod detected that one or more processes exited with non-zero status, thus causing "
         "the job to be "
         "terminated. The first process to do so was: Process name: " +
         process + " Exit code: " + std::to_string(exit_code);
}

}  // namespace khorovod::launcher
