"""khorovod: Horovod's Python API over the khorovod C++ runtime.

``import khorovod.torch as hvd`` is the PyTorch entry point (collectives on
torch tensors, DistributedOptimizer, broadcast helpers, elastic training).
This top-level package holds what is framework-neutral: the lifecycle and
topology calls, the exceptions, and the elastic ``run`` decorator.
"""

from . import elastic
from ._errors import (
    HorovodInternalError,
    HostsUpdatedInterrupt,
    JobFinishedError,
    JobFinishedExit,
    KhorovodError,
    NotInitializedError,
)
from .basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    nccl_runtime_info,
    nccl_runtime_version,
    rank,
    rocm_built,
    shutdown,
    size,
)

__all__ = [
    "elastic",
    "HorovodInternalError",
    "HostsUpdatedInterrupt",
    "JobFinishedError",
    "JobFinishedExit",
    "KhorovodError",
    "NotInitializedError",
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "gloo_built",
    "gloo_enabled",
    "init",
    "is_initialized",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "nccl_runtime_info",
    "nccl_runtime_version",
    "rank",
    "rocm_built",
    "shutdown",
    "size",
]
