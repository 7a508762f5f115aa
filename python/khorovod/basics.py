"""Process topology and lifecycle: init, shutdown, rank, size and friends.

Contract: as horovod.common.basics. Each query raises NotInitializedError (a
ValueError, as Horovod raises) before ``init()``; ``init()`` reads the
KHOROVOD_* variables that khorovodrun (or the operator) sets and raises
KhorovodError with the runtime's message when they are malformed or the
peers cannot be reached.

Thread-safety: see _context.py.
"""

from . import _build_info, _objects
from ._context import CONTEXT
from ._errors import raise_for_status


def init(comm=None, process_sets=None):
    """Joins the job (blocks until every rank of the first generation joined).

    ``process_sets``: ProcessSets (or rank lists) to register on every rank
    right away, or "dynamic" to allow add_process_set/remove_process_set
    later (as HOROVOD_DYNAMIC_PROCESS_SETS=1 does). ``comm`` (an MPI
    communicator in Horovod) must be None: there is no MPI here."""
    if comm is not None:
        raise ValueError(
            "khorovod: init(comm=...) takes no MPI communicator (khorovod runs without MPI)"
        )
    if CONTEXT.init():
        from . import process_sets as _process_sets  # noqa: PLC0415 (it imports this package)

        _process_sets.setup_at_init(process_sets)


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
    """True when every host runs the same number of ranks (Horovod's
    definition). Computed from each rank's local size with one allgather on
    the first call after each init, so every rank must call it (it is
    collective, as in khorovod a rank cannot see the others' placement)."""
    return CONTEXT.per_session(
        "is_homogeneous",
        lambda: (
            len(
                set(
                    _objects.allgather_object(
                        CONTEXT.runtime().local_size(), name="is_homogeneous.local_sizes"
                    )
                )
            )
            == 1
        ),
    )


def gloo_enabled():
    """True: host tensors always move over Gloo."""
    return True


def gloo_built():
    return True


def nccl_built():
    """NCCL's version code (e.g. 22105 for 2.21.5) when this build has the NCCL
    backend (pip: KHOROVOD_WITH_NCCL=ON), else 0, as Horovod answers."""
    return int(_build_info.NCCL_BUILT)


def nccl_runtime_info():
    """The NCCL this process would load (khorovod extension: Horovod has no
    such call): a dict with 'version' ('2.28.9'), 'version_code' (22809),
    'path', and the fault-tolerance calls the backend will use ('shrink',
    'grow', 'revoke', 'multi_rank_gpu': bools). The search honours
    KHOROVOD_NCCL_LIBRARY (docs/gpu.md, "Which NCCL"). Raises KhorovodError
    when none is usable (the message lists what was tried); returns {} in a
    build without the NCCL backend."""
    if not nccl_built():
        return {}
    from . import _khorovod  # noqa: PLC0415 (the extension loads lazily)

    code, message, facts = _khorovod.describe_backend("nccl")
    raise_for_status((code, message))
    out = dict(facts)
    out["version_code"] = int(out["version_code"])
    for key in ("shrink", "grow", "revoke", "multi_rank_gpu"):
        out[key] = out[key] == "1"
    return out


def nccl_runtime_version():
    """The loaded NCCL's version code (22809 for 2.28.9), or 0 when this build
    has no NCCL backend. Unlike nccl_built(), which names the headers it was
    compiled with, this is the libnccl found at run time."""
    info = nccl_runtime_info()
    return info.get("version_code", 0)


def cuda_built():
    """True when this build moves CUDA tensors (NCCL or host staging)."""
    return _build_info.CUDA_BUILT


def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    return False


def ccl_built():
    return False


def ddl_built():
    return False


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Writes a Chrome-trace timeline to ``file_path`` from now until
    stop_timeline() (or shutdown). As with KHOROVOD_TIMELINE/HOROVOD_TIMELINE,
    only rank 0 writes unless the path contains "{rank}". ``mark_cycles``
    marks each negotiation round that did work (CYCLE_START)."""
    raise_for_status(CONTEXT.runtime().start_timeline(str(file_path), bool(mark_cycles)))


def stop_timeline():
    """Completes the timeline file (a valid JSON array)."""
    raise_for_status(CONTEXT.runtime().stop_timeline())
