"""khorovod: Horovod's Python API over the khorovod C++ runtime.

``import khorovod.torch as hvd`` is the PyTorch entry point (collectives on
torch tensors, DistributedOptimizer, broadcast helpers, elastic training).
This top-level package holds what is framework-neutral: the lifecycle and
topology calls, the exceptions, and the elastic ``run`` decorator.
"""

from ._errors import (HorovodInternalError, HostsUpdatedInterrupt, JobFinishedError, KhorovodError,
                      NotInitializedError)
from . import elastic
from .basics import (cross_rank, cross_size, gloo_enabled, init, is_initialized, local_rank,
                     local_size, mpi_enabled, nccl_built, rank, shutdown, size)

__all__ = [
    "elastic",
    "HorovodInternalError", "HostsUpdatedInterrupt", "JobFinishedError", "KhorovodError", "NotInitializedError",
    "cross_rank", "cross_size", "gloo_enabled", "init", "is_initialized", "local_rank",
    "local_size", "mpi_enabled", "nccl_built", "rank", "shutdown", "size",
]
