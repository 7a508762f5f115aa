"""Horovod's ``State._host_messages`` as a view of the rendezvous' announcement.

Contract: Horovod's State keeps a queue of host updates its driver pushed;
scripts (Horovod's own elastic tests among them) poll
``state._host_messages.empty()`` to wait until the driver has noticed a host
change. khorovod has no queue: the rendezvous server announces a pending
membership change (workers joining or leaving) in the heartbeat, and the next
``commit()`` re-forms. ``HostMessages.empty()`` is therefore False exactly
while the runtime reports ``membership_changed()``, True otherwise (also
before ``init()`` and outside an elastic job). It reads, never consumes:
the re-formation at the next commit clears it. Local only (no collective),
so one rank may poll it alone. Thread-safety: as the runtime's query.
"""

from ._context import CONTEXT
from ._errors import NotInitializedError


class HostMessages:
    """Read-only stand-in for Horovod's ``queue.Queue`` of host updates."""

    def empty(self):
        try:
            runtime = CONTEXT.runtime()
        except NotInitializedError:  # no job: no update can be pending
            return True
        return not runtime.membership_changed()

    def qsize(self):
        return 0 if self.empty() else 1
