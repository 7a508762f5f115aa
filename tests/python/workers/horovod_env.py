"""Prints Horovod's launcher variables as this worker sees them before
init(), then checks them against the runtime's placement after init()."""

import os

import khorovod.torch as hvd

NAMES = (
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME",
    "HOROVOD_ELASTIC",
)


def main():
    before = {n: os.environ.get(n) for n in NAMES}
    hvd.init()
    placement = {
        "HOROVOD_RANK": hvd.rank(),
        "HOROVOD_SIZE": hvd.size(),
        "HOROVOD_LOCAL_RANK": hvd.local_rank(),
        "HOROVOD_LOCAL_SIZE": hvd.local_size(),
        "HOROVOD_CROSS_RANK": hvd.cross_rank(),
        "HOROVOD_CROSS_SIZE": hvd.cross_size(),
    }
    if before["HOROVOD_ELASTIC"] != "1":
        for name, value in placement.items():
            assert before[name] == str(value), (name, before[name], value)
    print(f"env before init: {before}", flush=True)
    hvd.shutdown()
    print(f"rank {placement['HOROVOD_RANK']}: OK", flush=True)


if __name__ == "__main__":
    main()
