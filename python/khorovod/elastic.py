"""Elastic training in Python: State and the @run decorator (hvd.elastic).

Contract: the failure semantics of the C++ API (runtime/include/khorovod/
elastic.h), restated:

- ``state.commit()`` saves the state, then every rank agrees (one small
  allreduce) whether the rendezvous server announced workers joining or
  leaving; if so it raises HostsUpdatedInterrupt on every rank at the same
  commit.
- ``@run`` calls ``func(state, ...)`` after ``state.sync()`` (broadcast from
  rank 0, the oldest survivor). On HorovodInternalError (a peer died:
  UNAVAILABLE, or was re-forming: ABORTED) it restores the last commit,
  re-forms the ring (``reset``), runs the reset callbacks and syncs again.
  On HostsUpdatedInterrupt it does the same without restoring. Any other
  exception propagates. After ``reset_limit`` re-formations (100, as the
  C++ RunOptions) it raises KhorovodError(FAILED_PRECONDITION) naming the
  reset limit and the last cause.
- A reset that fails because a peer died or vanished while the next
  generation formed, or the rendezvous was briefly unreachable (UNAVAILABLE,
  DEADLINE_EXCEEDED, ABORTED), is tried again; each try counts towards
  ``reset_limit``, and the tries stop after the elastic timeout
  (KHOROVOD_ELASTIC_TIMEOUT_SECONDS) with DEADLINE_EXCEEDED naming it. Only
  the rendezvous server's verdicts end the job otherwise: the job failed
  (its reset limit or elastic timeout; FAILED_PRECONDITION, message says
  which) or training finished (JOB_FINISHED: the others finished while this
  worker was out; it shuts down and ends with exit status 0 through
  JobFinishedExit, a SystemExit, as a late joiner's ``init()`` does).
- Outside an elastic job (khorovodrun without --min-np/--max-np) commit()
  never interrupts and a failure cannot be recovered: reset raises
  FAILED_PRECONDITION with the runtime's message.

Subclasses implement save(), restore() and sync() (and may override
reset(), called on every re-formation before the callbacks); ObjectState
keeps plain attributes; khorovod.torch.elastic provides TorchState.

Thread-safety: a State belongs to the training thread.
"""

import ctypes
import functools
import os
import time

from . import _khorovod, _objects
from ._context import CONTEXT
from ._errors import (
    HorovodInternalError,
    HostsUpdatedInterrupt,
    JobFinishedError,
    KhorovodError,
    exit_job_finished,
    raise_for_status,
)
from ._host_messages import HostMessages

_INT32 = 6  # dtype code of int32 (dtype.h)
_MAX = 3  # ReduceOp::kMax


class State:
    """Training state that survives re-formations. Subclass and implement
    save(), restore() and sync(); reset() (optional) runs after every
    re-formation, before the reset callbacks and sync (as Horovod's).
    ``bcast_object``/``get_rank`` are Horovod's constructor arguments (kept
    for subclasses such as ObjectState; None: khorovod's own)."""

    def __init__(self, bcast_object=None, get_rank=None):
        self._bcast_object = bcast_object
        self._get_rank = get_rank
        self._reset_callbacks = []
        # Serial number of the commit the state holds (0: none yet). Subclasses
        # save and restore it with their state and sync it from the holder of
        # the newest commit (TorchState does).
        self.commit_serial = 0
        # Horovod's internals that its elastic test scripts touch: the queue
        # of host updates (here a view of the runtime's membership_changed())
        # and the driver's last timestamp (unused: commit() asks the runtime).
        self._host_messages = HostMessages()
        self._last_updated_timestamp = 0

    def register_reset_callbacks(self, callbacks):
        """Callables run after every re-formation, before sync (e.g. to
        rescale the learning rate for the new world size)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def reset(self):
        """Called after every re-formation, before the callbacks and sync()."""

    def commit(self):
        """Saves the state; raises HostsUpdatedInterrupt if the job must re-form."""
        self.commit_serial += 1
        self.save()
        CONTEXT.runtime().record_commit()  # the steps since the last commit are kept (goodput)
        self.check_host_updates()

    def check_host_updates(self):
        runtime = CONTEXT.runtime()
        flag = (ctypes.c_int32 * 1)(1 if runtime.membership_changed() else 0)
        view = _khorovod.TensorView(ctypes.addressof(flag), _INT32, [1])
        handle = runtime.allreduce_async("elastic.membership", view, view, _MAX, 1.0, 1.0)
        raise_for_status(handle.wait())
        # A worker stopped with SIGTERM leaves the job here, at a commit
        # every rank holds, and its process ends (docs/elastic.md).
        runtime.at_commit_boundary()
        if flag[0]:
            raise HostsUpdatedInterrupt(
                "MEMBERSHIP_CHANGED", "workers joined or left; re-forming at this commit"
            )

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


def _broadcast_object(obj):
    """Rank 0's ``obj`` on every rank (pickle over the runtime's broadcast)."""
    return _objects.broadcast_object(obj, root_rank=0, name="elastic.object_state")


class ObjectState(State):
    """Plain Python attributes as elastic state (horovod.common.elastic's):
    every keyword becomes an attribute; save() records their values,
    restore() puts them back, sync() broadcasts them from rank 0."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)
        self._saved_state = kwargs
        self._set_attrs()

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            bcast = self._bcast_object or _broadcast_object
            self._saved_state = bcast(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


def _timed_sync(state):
    """state.sync(), recorded in the worker's state-sync metrics with the
    bytes the state reports (``synced_bytes()``, 0 when it cannot tell)."""
    start = time.monotonic()
    state.sync()
    size = state.synced_bytes() if hasattr(state, "synced_bytes") else 0
    CONTEXT.runtime().record_state_sync(int(size), time.monotonic() - start)


def run(func=None, *, reset_limit=100):
    """Decorator: ``@run def train(state, ...)``; see the module contract."""
    if func is None:
        return functools.partial(run, reset_limit=reset_limit)

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        resets = 0
        recovering_since = None  # from a reset until the sync after it succeeds
        while True:
            try:
                _timed_sync(state)
                if recovering_since is not None:
                    CONTEXT.runtime().record_recovered(time.monotonic() - recovering_since)
                    recovering_since = None
                result = func(state, *args, **kwargs)
                # Late joiners are now told the job is finishing (JobFinishedError)
                # instead of waiting for a generation that will never form.
                CONTEXT.runtime().mark_training_finished()
                return result
            except HorovodInternalError as e:
                state.restore()
                cause = e
            except HostsUpdatedInterrupt as e:
                cause = e
            if recovering_since is None:
                recovering_since = time.monotonic()
            CONTEXT.runtime().record_reset(_khorovod.STATUS_CODES.get(cause.code, -1))
            resets = _reset(resets, reset_limit, cause)
            state.on_reset()

    return wrapper


# What a failed reset may report when a peer died or vanished while the next
# generation formed, or the rendezvous was briefly unreachable: not a reason
# to end the job. The server's verdicts (job failed: its reset limit or its
# elastic timeout, FAILED_PRECONDITION) and JOB_FINISHED end the run.
_RETRYABLE_RESET = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED")


def _elastic_timeout_s():
    # The runtime reads the same variable (config.h) with the same default.
    try:
        return max(0.001, float(os.environ.get("KHOROVOD_ELASTIC_TIMEOUT_SECONDS", "600")))
    except ValueError:
        return 600.0


def _reset(resets, reset_limit, cause):
    """Re-forms the ring after `cause`; returns the new reset count. Each
    attempt counts towards reset_limit; failed attempts are retried until the
    reset limit or the elastic timeout, and the error says which ended it."""
    give_up_at = time.monotonic() + _elastic_timeout_s()
    while True:
        resets += 1
        if resets > reset_limit:
            raise KhorovodError(
                "FAILED_PRECONDITION",
                f"elastic run gave up: the reset limit of {reset_limit} resets was "
                f"reached; last cause: {cause}",
            ) from cause
        try:
            raise_for_status(CONTEXT.reset())
            return resets
        except JobFinishedError as e:
            try:
                CONTEXT.shutdown()
            except KhorovodError:
                pass  # the generation is gone; nothing more to leave
            exit_job_finished(e)
        except KhorovodError as e:
            if e.code not in _RETRYABLE_RESET:
                if e.code == "FAILED_PRECONDITION" and "worker_fenced" in e.runtime_message:
                    raise KhorovodError(
                        e.code,
                        "the rendezvous no longer counts this worker in "
                        f"the job: {e.runtime_message}",
                    ) from e
                if e.code == "FAILED_PRECONDITION":
                    raise KhorovodError(
                        e.code,
                        "the rendezvous ended the job (its reset limit or "
                        f"elastic timeout, see the reason): {e.runtime_message}",
                    ) from e
                raise
            if time.monotonic() >= give_up_at:
                raise KhorovodError(
                    "DEADLINE_EXCEEDED",
                    f"elastic run gave up: no generation formed within the elastic timeout "
                    f"of {_elastic_timeout_s():g} s; last cause: {e}",
                ) from e
            cause = e
