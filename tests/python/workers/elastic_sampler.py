"""One elastic epoch over an ElasticSampler passed as ``train_sampler=``
(Horovod's pattern), in which a worker is removed mid-epoch; run by
tests/python/test_elastic_sampler.py at 3 ranks through khorovodrun with a
host discovery script.

Every batch adds, on every rank, the allreduced histogram of the sample
indices the ranks trained on to ``state.counts``, which is committed with
the model and the sampler, so a batch rolled back by the re-formation is
uncounted with the rest of its effects. After committing batch FREEZE_AT,
worker-2 writes the marker file that makes the discovery script report 2
slots and stops taking part (bounded sleep): the others block in the next
batch, nothing more is committed, and khorovodrun removes a worker. The
survivors roll back to FREEZE_AT batches (FREEZE_AT * 3 * BATCH samples)
and finish the epoch as a world of 2; the remainder then divides evenly
(so no padding repeats a sample), and every sample must have been counted
exactly once. Usage: elastic_sampler.py MARKER_FILE
"""

import os
import sys
import time

import khorovod.torch as hvd
import torch

SAMPLES, BATCH, FREEZE_AT = 240, 4, 4


def main():
    marker = sys.argv[1]
    me = os.environ.get("KHOROVOD_WORKER_NAME", "?")
    hvd.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
    )
    features = torch.randn(SAMPLES, 3, generator=torch.Generator().manual_seed(1))
    sampler = hvd.elastic.ElasticSampler(list(range(SAMPLES)), shuffle=True, seed=7)
    state = hvd.elastic.TorchState(
        model=model,
        optimizer=opt,
        train_sampler=sampler,
        epoch=0,
        batches=0,
        counts=torch.zeros(SAMPLES),
        sizes=[],
    )

    @hvd.elastic.run
    def train(state):
        print(
            f"{me}: training as rank {hvd.rank()} of {hvd.size()} from sample "
            f"{state.train_sampler.processed_num}",
            flush=True,
        )
        indices = list(state.train_sampler)
        for batch_idx in range(0, -(-len(indices) // BATCH)):
            batch = torch.tensor(indices[batch_idx * BATCH : (batch_idx + 1) * BATCH])
            opt.zero_grad()
            model(features[batch]).pow(2).mean().backward()
            opt.step()
            seen = torch.bincount(batch, minlength=SAMPLES).float()
            state.counts += hvd.allreduce(seen, op=hvd.Sum, name="counts")
            state.batches += 1
            state.sizes = state.sizes + [hvd.size()]
            state.train_sampler.record_batch(batch_idx, BATCH)
            state.commit()
            if state.batches == FREEZE_AT and me == "worker-2":
                with open(marker, "w") as f:
                    f.write("shrink\n")
                print(f"{me}: frozen after committing batch {state.batches}", flush=True)
                time.sleep(60)  # removed by khorovodrun long before this ends

    train(state)
    counts = state.counts
    print(
        f"{me}: epoch done: rank {hvd.rank()} of {hvd.size()}, batches {state.batches}, "
        f"sizes {sorted(set(state.sizes))}, min {int(counts.min())}, max {int(counts.max())}, "
        f"total {int(counts.sum())}",
        flush=True,
    )
    hvd.shutdown()


if __name__ == "__main__":
    main()
