"""Python objects through the runtime's host collectives, with no framework.

Contract: ``broadcast_object`` returns root's object on every rank and
``allgather_object`` every rank's (every member's) object in rank order, as
Horovod's helpers of the same names. Objects travel pickled (cloudpickle when
it is installed, as Horovod, so lambdas and local classes work), as uint8
buffers the runtime reads and writes directly: bytes in Python memory, no
tensor library. The framework bindings (khorovod.torch, khorovod.tensorflow)
and the framework-free package (elastic state, is_homogeneous) all use these
two, so an object crosses the wire the same way whatever the script imports.

Both are collective: every rank (every member of ``process_set``) calls them
in the same order with the same name. ``process_set`` is a ProcessSet, None
or the global set. They block until done and raise what the runtime reports
(``raise_for_status``). Thread-safety: as the runtime's submissions.
"""

import ctypes
import pickle

from . import _khorovod, process_sets
from ._context import CONTEXT
from ._errors import raise_for_status

try:  # Horovod serializes objects with cloudpickle.
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - depends on the environment
    _pickler = pickle

_UINT8, _INT64 = 5, 7  # the binding's dtype codes (khorovod_ext.cc)


def _view(buffer, dtype, count):
    """A host TensorView of ``count`` elements over the bytearray ``buffer``
    (at least one byte long, so an empty payload still has an address)."""
    address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
    return _khorovod.TensorView(address, dtype, [count], 0, 0)


def _wait(handle):
    """Waits for ``handle`` (the caller's buffers stay referenced until then)."""
    raise_for_status(handle.wait())
    return handle


def _broadcast(buffer, dtype, count, root_rank, name, set_id):
    runtime = CONTEXT.runtime()
    view = _view(buffer, dtype, count)
    if set_id:
        handle = runtime.broadcast_async_in_set(name, view, int(root_rank), set_id)
    else:
        handle = runtime.broadcast_async(name, view, int(root_rank))
    _wait(handle)


def _allgather(buffer, dtype, count, name, set_id):
    runtime = CONTEXT.runtime()
    view = _view(buffer, dtype, count)
    if set_id:
        handle = runtime.allgather_async_in_set(name, view, set_id)
    else:
        handle = runtime.allgather_async(name, view)
    data, _dtype, _shape = _wait(handle).take_output()
    return bytes(data)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Root's ``obj`` on every rank (root gets its own object back)."""
    set_id = process_sets.resolve(process_set)
    base = name or CONTEXT.auto_name("broadcast_object", set_id)
    is_root = CONTEXT.runtime().rank() == root_rank
    payload = _pickler.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if is_root else b""
    length = bytearray(len(payload).to_bytes(8, "little", signed=True))
    _broadcast(length, _INT64, 1, root_rank, f"{base}.size", set_id)
    size = int.from_bytes(length, "little", signed=True)
    data = bytearray(payload) if is_root else bytearray(size)
    _broadcast(data if size else bytearray(1), _UINT8, size, root_rank, f"{base}.data", set_id)
    return obj if is_root else pickle.loads(bytes(data))


def allgather_object(obj, name=None, process_set=None):
    """The list of every rank's (member's) ``obj``, in rank order."""
    set_id = process_sets.resolve(process_set)
    # Named after the object's type unless named, as Horovod does: every rank
    # agrees on it even when their unnamed-call counters differ (a rank whose
    # collective was refused, e.g. after another rank joined, counted one more).
    base = name or f"allgather_object.{type(obj).__name__}"
    payload = _pickler.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    size = bytearray(len(payload).to_bytes(8, "little", signed=True))
    sizes_raw = _allgather(size, _INT64, 1, f"{base}.size", set_id)
    sizes = [
        int.from_bytes(sizes_raw[i : i + 8], "little", signed=True)
        for i in range(0, len(sizes_raw), 8)
    ]
    gathered = _allgather(
        bytearray(payload) or bytearray(1), _UINT8, len(payload), f"{base}.data", set_id
    )
    out, offset = [], 0
    for n in sizes:
        out.append(pickle.loads(gathered[offset : offset + n]))
        offset += n
    return out
