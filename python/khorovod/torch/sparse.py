"""Sparse allreduce as Horovod does it: an allgather of every rank's indices
and values, rebuilt into one sparse tensor (duplicates summed when coalesced).

Contract: ``sparse_allreduce_async(tensor, name, op)`` takes a torch sparse
COO tensor of the same dense shape on every rank (nnz may differ) and
returns a handle; ``synchronize(handle)`` (or ``handle()``, as Horovod's
returned function) returns the sparse sum, or the
average for op=Average (values divided by the number of ranks). Other ops
raise ValueError. With ``process_set``, among its members (Average divides
by the set's size). Two collectives named ``<name>.indices`` and
``<name>.values`` carry it.

Thread-safety: as mpi_ops.
"""

import torch

from . import mpi_ops


class SparseHandle:
    """Both allgathers in flight; ``wait`` builds the reduced sparse tensor."""

    __slots__ = ("_group", "_like", "_op", "_size")

    def __init__(self, group, like, op, size):
        self._group, self._like, self._op, self._size = group, like, op, size

    def ready(self):
        return self._group.ready()

    def __call__(self):
        # Horovod's sparse_allreduce_async returns a function that waits.
        return self.wait()

    def wait(self):
        indices, values = self._group.wait()
        if self._op == mpi_ops.Average:
            values = values / self._size
        return torch.sparse_coo_tensor(
            indices.t(), values, self._like.shape, dtype=self._like.dtype
        )


def sparse_allreduce_async(tensor, name=None, op=mpi_ops.Average, process_set=None):
    ps = mpi_ops.process_sets.resolve(process_set)
    if not tensor.is_sparse:
        raise ValueError("khorovod: sparse_allreduce_async expects a sparse COO tensor")
    if op not in (mpi_ops.Average, mpi_ops.Sum):
        raise ValueError("khorovod: sparse allreduce supports op=Average or op=Sum")
    base = mpi_ops._name(name, "sparse_allreduce", ps)
    # allgather concatenates along dimension 0, so indices travel as rows.
    indices = tensor._indices().t().contiguous()
    values = tensor._values().contiguous()
    group = mpi_ops.GroupHandle(
        [
            mpi_ops.allgather_async(indices, name=f"{base}.indices", process_set=process_set),
            mpi_ops.allgather_async(values, name=f"{base}.values", process_set=process_set),
        ]
    )
    return SparseHandle(group, tensor, op, mpi_ops.process_sets.set_size(ps))
