// RunBackgroundLoop: the body of a session's background thread. It paces
// negotiation rounds (an idle rank waits for work, a burst of submissions
// is gathered into one round, a busy rank keeps the cycle time), runs each
// round (core/negotiator.h) and executes what it agreed
// (core/process_set_comm.h, core/executor.h), until shutdown is requested,
// a stall shuts the job down, or a collective fails.
//
// On the way out every pending and later operation fails with the reason:
// kAborted after a shutdown (later calls: kFailedPrecondition, "call init()
// again") or a stall shutdown (later calls fail the same way); the error
// itself otherwise. After an error the session's connections are closed at
// once, so peers blocked on this rank see EOF instead of a timeout.
//
// Thread-safety: runs on the session's own thread; touches only what
// Session says the background thread owns, and the queue.
#pragma once

#include "core/session.h"

namespace khorovod {

void RunBackgroundLoop(Session& session);

}  // namespace khorovod
