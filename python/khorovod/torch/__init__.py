"""khorovod.torch: horovod.torch's API on the khorovod runtime.

Replace ``import horovod.torch as hvd`` with ``import khorovod.torch as hvd``.
See docs/python.md for the API and every difference from horovod.
"""

from .. import _errors
from .._errors import (
    HorovodInternalError,
    HostsUpdatedInterrupt,
    InvalidArgumentError,
    JobFinishedError,
    JobFinishedExit,
    KhorovodError,
)
from ..basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
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
    start_timeline,
    stop_timeline,
)
from . import elastic  # noqa: E402  (khorovod.torch.elastic)
from .compression import Compression
from .functions import (
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from .mpi_ops import (
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allgather_async,
    allreduce,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather,
    grouped_allgather_async,
    grouped_allreduce,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    grouped_reducescatter,
    grouped_reducescatter_async,
    join,
    poll,
    reducescatter,
    reducescatter_async,
    synchronize,
)
from .optimizer import DistributedOptimizer
from .process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from .sparse import sparse_allreduce_async
from .sync_batch_norm import SyncBatchNorm

del _errors
