"""khorovod.tensorflow: horovod.tensorflow's API on the khorovod runtime.

Replace ``import horovod.tensorflow as hvd`` with
``import khorovod.tensorflow as hvd``. The collectives are TensorFlow custom
ops over the same C++ runtime as khorovod.torch (mpi_ops.py), so both
frameworks can share one process and one job. See docs/python.md for the
supported TensorFlow versions and every difference from Horovod.
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
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from ..process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from . import (
    elastic,  # noqa: E402  (khorovod.tensorflow.elastic)
    util,
)
from .collectives import allreduce, grouped_allreduce, grouped_reducescatter, reducescatter
from .compression import Compression
from .functions import (
    allgather_object,
    broadcast_global_variables,
    broadcast_object,
    broadcast_object_fn,
    broadcast_variables,
)
from .gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from .mpi_ops import (
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    alltoall,
    barrier,
    broadcast,
    broadcast_,
    grouped_allgather,
    join,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    size_op,
)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNormalization
from .util import _executing_eagerly

del _errors
