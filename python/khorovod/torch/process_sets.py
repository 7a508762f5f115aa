"""Process sets (horovod.torch's ProcessSet API), global set only.

Contract: ``global_process_set`` is the set of all ranks and is what every
collective uses; ``process_set=None`` or ``process_set=global_process_set``
are accepted everywhere Horovod takes the argument. Sub-sets need runtime
support (separate coordination and rings per set) that khorovod does not
have yet: ``add_process_set``/``remove_process_set`` and any other
ProcessSet passed to a collective raise NotImplementedError (a RuntimeError)
naming the limitation, rather than running a collective over the wrong ranks.

Thread-safety: immutable objects.
"""

from .._context import CONTEXT


class ProcessSet:
    """A set of ranks. Only the global set (all ranks) is usable here."""

    def __init__(self, ranks=None):
        self.ranks = None if ranks is None else sorted(int(r) for r in ranks)
        self.process_set_id = 0 if ranks is None else None

    def _is_global(self):
        return self.ranks is None

    def size(self):
        return CONTEXT.runtime().size() if self._is_global() else len(self.ranks)

    def rank(self):
        rank = CONTEXT.runtime().rank()
        if self._is_global():
            return rank
        return self.ranks.index(rank) if rank in self.ranks else -1

    def included(self):
        return self._is_global() or CONTEXT.runtime().rank() in self.ranks

    def __repr__(self):
        return "ProcessSet(global)" if self._is_global() else f"ProcessSet(ranks={self.ranks})"


global_process_set = ProcessSet()

_UNSUPPORTED = ("khorovod: process sets other than global_process_set are not supported "
                "(the runtime coordinates all ranks as one set); see docs/python.md")


def add_process_set(process_set):
    raise NotImplementedError(_UNSUPPORTED)


def remove_process_set(process_set):
    raise NotImplementedError(_UNSUPPORTED)


def check(process_set):
    """Accepts None or the global set; refuses any other set clearly."""
    if process_set is None or process_set is global_process_set:
        return
    if isinstance(process_set, ProcessSet):
        if process_set._is_global():
            return
        raise NotImplementedError(_UNSUPPORTED)
    raise ValueError(f"khorovod: process_set must be a ProcessSet, got "
                     f"{type(process_set).__name__}")
