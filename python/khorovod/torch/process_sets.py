"""horovod.torch's process-set names; the implementation is framework-neutral
(khorovod/process_sets.py)."""

from ..process_sets import (  # noqa: F401
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
    resolve,
    set_rank,
    set_size,
)
