"""TorchState.sync broadcasts from the holder of the newest commit, and fresh
workers resume from a checkpoint. Usage: elastic_election.py MODE CKPT_PATH
  MODE=elect: the last rank commits three times, the others only join the
              commits' agreement (as ranks that rolled back would hold less);
              after sync every rank holds the last rank's values.
  MODE=write: every rank trains 5 steps with checkpoint_to(path, every=2).
  MODE=resume: fresh ranks with different values sync from the checkpoint.
"""

import sys

import khorovod.torch as hvd
import torch


def main():
    mode, path = sys.argv[1], sys.argv[2]
    hvd.init()
    model = torch.nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        model.weight.fill_(100.0 + hvd.rank())
    state = hvd.elastic.TorchState(model=model, step=0)
    state.checkpoint_to(path, every=2)
    if mode == "elect":
        holder = hvd.rank() == hvd.size() - 1
        for i in range(1, 4):
            if holder:
                with torch.no_grad():
                    model.weight.fill_(float(i))
                state.step = i
                state.commit()
            else:
                state.check_host_updates()
        state.sync()
        assert state.step == 3 and state.commit_serial == 3, (state.step, state.commit_serial)
        assert torch.equal(model.weight, torch.full((4, 4), 3.0)), model.weight
    elif mode == "write":
        state.sync()
        while state.step < 5:
            with torch.no_grad():
                model.weight.add_(0.5)
            state.step += 1
            state.commit()
    else:
        state.sync()
        # Every 2nd commit was kept: the one after step 4 (weights 100 + 4 * 0.5).
        assert state.step == 4 and state.commit_serial == 4, (state.step, state.commit_serial)
        assert torch.equal(model.weight, torch.full((4, 4), 102.0)), model.weight
    print(f"rank {hvd.rank()}: {mode} OK", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
