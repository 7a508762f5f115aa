"""horovod.torch.mpi_ops: every collective on torch tensors.

The asynchronous forms, handles, op codes and in-place blocking forms come
from _async_ops.py (its docstring states the contract) and, for every
collective but allreduce, _async_data_ops.py; the differentiable
blocking forms from autograd_ops.py, which is built on _async_ops. This
module only puts them together under Horovod's name, so neither of the two
imports the other's importer (no import cycle).

Thread-safety: as _async_ops.
"""

from ._async_data_ops import *  # noqa: F401,F403
from ._async_ops import *  # noqa: F401,F403

# Private names that sparse.py and the tests reach through this module.
from ._async_ops import _DTYPES, _name, _view  # noqa: F401
from .autograd_ops import (  # noqa: F401
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
