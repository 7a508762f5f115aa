"""horovod.common.elastic's names (State, ObjectState, run_fn) for scripts
that import them from there; the implementation is khorovod.elastic."""

from ..elastic import ObjectState, State, run

__all__ = ["State", "ObjectState", "run_fn"]


def run_fn(func, reset=None):
    """Horovod's run_fn(func, reset): ``reset`` is khorovod's own re-formation,
    so the argument is accepted and not used."""
    del reset
    return run(func)
