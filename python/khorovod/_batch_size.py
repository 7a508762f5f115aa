"""The configured samples of a training step, shared by the framework
bindings' step marks (khorovod.torch's optimizer, khorovod.tensorflow's
Keras optimizer): the ``batch_size`` argument, else KHOROVOD_BATCH_SIZE,
else None (the binding infers it). A value that is not a positive integer
is a ValueError naming where it came from. Pure; thread-safe."""

import os


def fixed_batch_size(batch_size):
    if batch_size is not None:
        value, source = batch_size, "batch_size"
    else:
        value, source = os.environ.get("KHOROVOD_BATCH_SIZE"), "KHOROVOD_BATCH_SIZE"
        if not value:
            return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = -1
    if n < 1:
        raise ValueError(f"khorovod: {source} must be a positive integer, got {value!r}")
    return n
