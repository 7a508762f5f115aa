"""Process sets: horovod.torch's ProcessSet API over the runtime's sets.

Contract (as horovod.common.process_sets; differences in docs/python.md):

- ``ProcessSet(ranks)`` describes a subset of the job's global ranks. It is
  usable once registered: passed to ``init(process_sets=[...])`` (static
  sets) or to ``add_process_set`` (dynamic sets, which need
  ``HOROVOD_DYNAMIC_PROCESS_SETS=1``/``KHOROVOD_DYNAMIC_PROCESS_SETS=1`` or
  ``init(process_sets="dynamic")``). Registering and removing are
  collective: every rank makes the same calls in the same order.
- The runtime gives each set its own connection among its members; a
  collective with ``process_set=ps`` involves only ``ps``'s members, and a
  rank outside ``ps`` that calls it gets ValueError at once.
- ``global_process_set`` (id 0) holds every rank and is the default.
- ``rank()``/``size()``/``included()`` answer for the running generation;
  ``rank()`` is -1 on a rank outside the set; all three are None while the
  set is not registered.
- An elastic reset (and shutdown) drops every set but the global one: the
  ranks they named belong to the old generation. Their ProcessSet objects
  become unregistered (``process_set_id`` None); register them again (at
  the top of the ``elastic.run`` function, which every rank enters after a
  re-formation) to use them after the reset.

Thread-safety: registration is serialized by a lock; queries may come from
any thread.
"""

import os
import threading

from ._context import CONTEXT
from ._errors import InvalidArgumentError, raise_for_status


class ProcessSet:
    """A set of global ranks (ascending)."""

    def __init__(self, ranks):
        if isinstance(ranks, ProcessSet):
            ranks = ranks.ranks
        try:
            self.ranks = sorted({int(r) for r in ranks})
        except TypeError as e:
            raise ValueError(
                f"khorovod: ProcessSet takes a sequence of ranks, got "
                f"{type(ranks).__name__} (MPI communicators are not supported)"
            ) from e
        self._id = None
        self._generation = None

    @property
    def process_set_id(self):
        """The runtime's id while registered in the running generation, else None."""
        return self._registered_id()

    def _registered_id(self):
        if self._id is not None and self._generation != CONTEXT.generation():
            self._id, self._generation = None, None
        return self._id

    def _set_registered(self, set_id):
        self._id = set_id
        self._generation = None if set_id is None else CONTEXT.generation()

    def size(self):
        if self._registered_id() is None:
            return None
        return len(self.ranks)

    def rank(self):
        if self._registered_id() is None:
            return None
        return CONTEXT.runtime().process_set_rank(self.process_set_id)

    def included(self):
        if self._registered_id() is None:
            return None
        return CONTEXT.runtime().rank() in self.ranks

    def __eq__(self, other):
        return isinstance(other, ProcessSet) and self.ranks == other.ranks

    def __hash__(self):
        return hash(tuple(self.ranks))

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """Every rank of the running generation; always registered (id 0)."""

    def __init__(self):
        super().__init__([])

    def _registered_id(self):
        return 0 if CONTEXT.is_initialized() else None

    @property
    def ranks(self):
        return list(range(CONTEXT.runtime().size())) if CONTEXT.is_initialized() else []

    @ranks.setter
    def ranks(self, _value):
        pass  # fixed by the generation

    def size(self):
        return CONTEXT.runtime().size() if CONTEXT.is_initialized() else None

    def rank(self):
        return CONTEXT.runtime().rank() if CONTEXT.is_initialized() else None

    def included(self):
        return True if CONTEXT.is_initialized() else None

    def __repr__(self):
        return "ProcessSet(process_set_id=0, global)"


global_process_set = _GlobalProcessSet()

_lock = threading.Lock()
_dynamic = {"enabled": False}


def _dynamic_from_env():
    for var in ("KHOROVOD_DYNAMIC_PROCESS_SETS", "HOROVOD_DYNAMIC_PROCESS_SETS"):
        value = os.environ.get(var)
        if value is not None:
            return value.strip().lower() not in ("", "0", "false", "no", "off")
    return False


def _register(process_set):
    code, message, set_id = CONTEXT.runtime().add_process_set(list(process_set.ranks))
    raise_for_status((code, message))
    process_set._set_registered(set_id)
    return process_set


def setup_at_init(process_sets):
    """init(process_sets=...): None, "dynamic", or a list of ProcessSets
    (or rank lists) to register now, in that order, on every rank."""
    with _lock:
        _dynamic["enabled"] = _dynamic_from_env() or process_sets == "dynamic"
        if process_sets is None or process_sets == "dynamic":
            return
        for ps in process_sets:
            ps = ps if isinstance(ps, ProcessSet) else ProcessSet(ps)
            if ps.ranks == list(range(CONTEXT.runtime().size())):
                continue  # the global set is always there, as in Horovod
            _register(ps)


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a sequence of ranks) on every rank
    and returns it. Collective. ValueError when dynamic process sets are off,
    the ranks are invalid, or a set with the same ranks is registered."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    with _lock:
        if not _dynamic["enabled"]:
            raise InvalidArgumentError(
                "INVALID_ARGUMENT",
                "add_process_set needs dynamic process sets: set "
                'HOROVOD_DYNAMIC_PROCESS_SETS=1 (or init(process_sets="dynamic"))',
            )
        if ps._registered_id() is not None:
            raise InvalidArgumentError("INVALID_ARGUMENT", f"{ps!r} is already registered")
        return _register(ps)


def remove_process_set(process_set):
    """Unregisters ``process_set`` on every rank (collective). Returns False,
    removing nothing, for the global set or a set that is not registered."""
    with _lock:
        if not _dynamic["enabled"]:
            raise InvalidArgumentError(
                "INVALID_ARGUMENT",
                "remove_process_set needs dynamic process sets: set "
                'HOROVOD_DYNAMIC_PROCESS_SETS=1 (or init(process_sets="dynamic"))',
            )
        set_id = process_set._registered_id() if isinstance(process_set, ProcessSet) else None
        if not set_id:
            return False
        raise_for_status(CONTEXT.runtime().remove_process_set(set_id))
        process_set._set_registered(None)
        return True


def resolve(process_set):
    """The runtime id for a collective's ``process_set`` argument: 0 for None
    or the global set; ValueError for anything not registered now."""
    if process_set is None or process_set is global_process_set:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError(
            f"khorovod: process_set must be a ProcessSet, got {type(process_set).__name__}"
        )
    set_id = process_set._registered_id()
    if set_id is None:
        raise InvalidArgumentError(
            "INVALID_ARGUMENT",
            f"{process_set!r} is not registered (pass it to init(process_sets=...) "
            "or add_process_set; an elastic reset drops every non-global set)",
        )
    return set_id


def set_rank(set_id):
    """This rank's index in set ``set_id`` (its global rank for the global set)."""
    runtime = CONTEXT.runtime()
    return runtime.rank() if set_id == 0 else runtime.process_set_rank(set_id)


def set_size(set_id):
    runtime = CONTEXT.runtime()
    return runtime.size() if set_id == 0 else runtime.process_set_size(set_id)
