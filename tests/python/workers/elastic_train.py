"""An elastic Python training loop that a test kills a worker of.

The state has a real model (trained on generated data through
DistributedOptimizer) and a probe parameter whose gradient is 1 on every
rank, so after S steps of plain SGD it must equal -lr * S exactly whatever
the world size was at each step: a rolled-back step applied twice, or a lost
commit, changes it. The original worker-1 SIGKILLs itself right after
committing step FAIL_AT; khorovodrun starts a replacement that joins at a
later commit. Training goes on past STEPS until the world is back to
FULL_SIZE (bounded by MAX_STEPS), so the replacement is part of the job
before it ends. The training function registers a process set each time it
starts (every rank, after every re-formation) and checks that the one from
before the re-formation was dropped. Usage: elastic_train.py STEPS FAIL_AT
FULL_SIZE. With ELASTIC_TRAIN_SIGTERM=1, worker-1 sends itself SIGTERM at
the start of step FAIL_AT instead (as an eviction does): it leaves at that
step's commit, and the survivors roll nothing back (each prints how many
steps it started: as many as its final step)."""

import os
import signal
import sys
import time

import khorovod.torch as hvd
import torch

LR = 0.125  # exact in binary, so -LR * steps is exact in float32


def main():
    steps, fail_at, full_size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    max_steps = 200000
    hvd.init(process_sets="dynamic")
    me = os.environ.get("KHOROVOD_WORKER_NAME", "?")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    probe = torch.nn.Parameter(torch.zeros(4))
    params = list(model.named_parameters()) + [("probe", probe)]
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD([p for _, p in params], lr=LR), named_parameters=params
    )
    data = torch.randn(512, 8, generator=torch.Generator().manual_seed(5))
    labels = (data[:, 0] > 0).long()
    state = hvd.elastic.TorchState(model=model, optimizer=opt, step=0, resets=0)

    def on_reset():
        state.resets += 1
        print(
            f"{me}: re-formed as rank {hvd.rank()} of {hvd.size()} at step {state.step}", flush=True
        )

    state.register_reset_callbacks([on_reset])

    saved_probe = {"value": probe.detach().clone()}
    orig_save, orig_restore, orig_sync = state.save, state.restore, state.sync

    # The probe lives outside the model: extend save/restore/sync for it,
    # the way users add their own tensors to a TorchState subclass.
    def save():
        orig_save()
        saved_probe["value"] = probe.detach().clone()

    def restore():
        orig_restore()
        with torch.no_grad():
            probe.copy_(saved_probe["value"])

    def sync():
        orig_sync()
        hvd.broadcast_(probe.data, root_rank=0, name="probe")
        saved_probe["value"] = probe.detach().clone()

    state.save, state.restore, state.sync = save, restore, sync

    sets = {}
    ran = {"steps": 0}  # steps this process executed, rolled-back ones included
    sigterm = os.environ.get("ELASTIC_TRAIN_SIGTERM") == "1"

    @hvd.elastic.run
    def train(state):
        # Process sets belong to one generation: the set registered before a
        # re-formation is gone, and every rank (the replacement too) registers
        # a new one here, where they all start after a re-formation.
        old = sets.get("head")
        if old is not None:
            assert old.process_set_id is None and old.size() is None, old
            print(f"{me}: process set dropped by the re-formation", flush=True)
        head = sets["head"] = hvd.add_process_set([0])
        if head.included():
            one = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=head, name="head.sum")
            assert torch.equal(one, torch.ones(1)), one
        loss = torch.tensor(float("nan"))  # no step left to run after a late re-formation
        while state.step < steps or hvd.size() < full_size:
            if state.step >= max_steps:
                raise RuntimeError(
                    f"the world did not grow back to {full_size} workers within {max_steps} steps"
                )
            ran["steps"] += 1  # started: a step cut short and run again counts twice
            if sigterm and state.step + 1 == fail_at and me == "worker-1":
                # At the start of the step, with compute still to do: a worker
                # that left at once would fail this step on every survivor.
                print(f"{me}: SIGTERM at the start of step {state.step + 1}", flush=True)
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.3)
            r, n = hvd.rank(), hvd.size()
            lo = ((state.step * n + r) * 16) % 512
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(
                model(data[lo : lo + 16]), labels[lo : lo + 16]
            )
            (loss + probe.sum()).backward()
            opt.step()
            state.step += 1
            state.commit()
            if not sigterm and state.step == fail_at and me == "worker-1":
                print(f"{me}: simulating a crash after committing step {state.step}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        return loss.item()

    loss = train(state)
    expected = torch.full((4,), -LR * state.step)
    assert torch.equal(probe.detach(), expected), f"probe {probe.tolist()} != {expected.tolist()}"
    checksum = sum(p.double().sum().item() for p in model.parameters())
    sums = hvd.allgather_object(checksum)
    assert all(s == sums[0] for s in sums), f"ranks disagree: {sums}"
    print(
        f"{me}: done: rank {hvd.rank()} of {hvd.size()}, step {state.step}, "
        f"resets {state.resets}, ran {ran['steps']}, loss {loss:.4f}, checksum {checksum:.6f}",
        flush=True,
    )
    hvd.shutdown()


if __name__ == "__main__":
    main()
