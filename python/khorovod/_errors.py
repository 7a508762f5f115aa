"""The Python error model of khorovod: one exception class per runtime Status.

Contract: every failed runtime call raises a subclass of KhorovodError (a
RuntimeError, so ``except RuntimeError`` written for Horovod catches it) whose
message is the runtime's own message, prefixed with its status code name
(e.g. ``MISMATCH: tensor 'x' ...``) and whose ``code`` attribute holds that
name. Names follow horovod where Horovod has one:

- HorovodInternalError: the transport failed (UNAVAILABLE) or a peer was
  re-forming (ABORTED). Elastic ``run`` rolls back and re-forms on it.
- InvalidArgumentError (also a ValueError, as Horovod raises for bad
  arguments): the runtime refused the call itself (INVALID_ARGUMENT), or a
  tensor of that name is still in flight on this rank (ALREADY_EXISTS).
- HostsUpdatedInterrupt: ``commit`` found that workers joined or left
  (MEMBERSHIP_CHANGED). Elastic ``run`` re-forms without rolling back.
- JobFinishedError: an elastic worker asked to join after another worker's
  training finished (JOB_FINISHED); there is nothing left to do. ``init()``
  and ``elastic.run`` do not raise it: they end the worker with exit status
  0 through JobFinishedExit (a SystemExit carrying the JobFinishedError as
  ``error``), so unmodified Horovod scripts end cleanly (see docs/elastic.md).

Thread-safety: pure functions and classes.
"""


class KhorovodError(RuntimeError):
    """A runtime call failed; ``code`` is the runtime's status code name."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.runtime_message = message


class HorovodInternalError(KhorovodError):
    """A peer failed or was re-forming: the collective did not complete."""


class HostsUpdatedInterrupt(KhorovodError):
    """Workers joined or left; every rank re-forms at this commit."""


class InvalidArgumentError(KhorovodError, ValueError):
    """The call's arguments were refused (bad name, dtype, device, duplicate name)."""


class JobFinishedError(KhorovodError):
    """The elastic job finished training before this worker joined: exit 0."""


class JobFinishedExit(SystemExit):
    """Ends a worker that has nothing left to do (the elastic job finished
    training before it joined) with exit status 0. A SystemExit, so
    ``except Exception`` in a script does not swallow it; ``error`` is the
    JobFinishedError with the runtime's message."""

    def __init__(self, error):
        super().__init__(0)
        self.error = error


def exit_job_finished(error):
    """Says why on stderr and raises JobFinishedExit(error)."""
    import sys

    print(
        f"khorovod: this worker ends with exit status 0: the elastic job finished training "
        f"before it joined ({error})",
        file=sys.stderr,
        flush=True,
    )
    raise JobFinishedExit(error) from error


class NotInitializedError(KhorovodError, ValueError):
    """A call needed init() first (FAILED_PRECONDITION before init)."""


from . import _khorovod  # noqa: E402  (after the classes it does not need)

# Status code value -> name, a constant table read from the runtime.
_NAMES = {value: name for name, value in _khorovod.STATUS_CODES.items()}


def raise_for_status(status):
    """Raises the exception for a (code, message) tuple from the extension."""
    code, message = status[0], status[1]
    if code == 0:
        return
    name = _NAMES.get(code, f"CODE_{code}")
    if name in ("UNAVAILABLE", "ABORTED"):
        raise HorovodInternalError(name, message)
    if name in ("INVALID_ARGUMENT", "ALREADY_EXISTS"):
        raise InvalidArgumentError(name, message)
    if name == "MEMBERSHIP_CHANGED":
        raise HostsUpdatedInterrupt(name, message)
    if name == "JOB_FINISHED":
        raise JobFinishedError(name, message)
    raise KhorovodError(name, message)
