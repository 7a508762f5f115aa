// Horovod messages: horovodrun's wording for how an elastic job failed.
//
// Scripts and tests written for horovodrun match its error messages (Horovod's
// own elastic tests do: pytest.raises(RuntimeError, match=...)). khorovodrun
// ends its failure line with the same sentence where the cause is the same:
//
// Contract:
//  * ResetLimitExceededMessage(limit): Horovod's
//    RESET_LIMIT_EXCEEDED_MESSAGE (horovod/runner/elastic/constants.py),
//    verbatim, for a job the rendezvous failed because its reset limit was
//    reached.
//  * ProcessesFailedMessage(process, exit_code): the RuntimeError text of
//    horovod/runner/gloo_run.py for a job that ended because processes exited
//    non-zero (in an elastic job: all hosts blacklisted), on one line; `process`
//    names the first process that failed.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

namespace khorovod::launcher {

std::string ResetLimitExceededMessage(int limit);
std::string ProcessesFailedMessage(const std::string& process, int exit_code);

}  // namespace khorovod::launcher
