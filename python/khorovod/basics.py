"""Process topology and lifecycle: init, shutdown, rank, size and friends.

Contract: as horovod.common.basics. Each query raises NotInitializedError (a
ValueError, as Horovod raises) before ``init()``; ``init()`` reads the
KHOROVOD_* variables that khorovodrun (or the operator) sets and raises
KhorovodError with the runtime's message when they are malformed or the
peers cannot be reached.

Thread-safety: see _context.py.
"""

from ._context import CONTEXT


def init():
    """Joins the job (blocks until every rank of the first generation joined)."""
    CONTEXT.init()


def shutdown():
    """Leaves the job. Collective: call it on every rank. Idempotent."""
    CONTEXT.shutdown()


def is_initialized():
    return CONTEXT.is_initialized()


def rank():
    return CONTEXT.runtime().rank()


def size():
    return CONTEXT.runtime().size()


def local_rank():
    return CONTEXT.runtime().local_rank()


def local_size():
    return CONTEXT.runtime().local_size()


def cross_rank():
    return CONTEXT.runtime().cross_rank()


def cross_size():
    return CONTEXT.runtime().cross_size()


def is_homogeneous():
    """True: khorovodrun starts the same number of workers on every host."""
    CONTEXT.runtime()
    return True


def gloo_enabled():
    return True


def nccl_built():
    """False: this build moves host tensors only (the NCCL backend is separate)."""
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    return False
