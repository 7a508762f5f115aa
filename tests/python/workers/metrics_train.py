"""A torch training loop with no metrics code: DistributedOptimizer's steps
must show up in the worker's Prometheus series. Trains until the file named
by argv[1] exists (the test creates it once it has seen the series), at
most argv[2] seconds; prints 'rank R: OK'."""

import os
import sys
import time

import khorovod.torch as hvd
import torch

stop_file, limit_s = sys.argv[1], float(sys.argv[2])
hvd.init()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
deadline = time.monotonic() + limit_s
step = 0
while time.monotonic() < deadline:
    # Every rank decides to stop at the same step (rank 0's view).
    stop = torch.tensor([1 if step % 20 == 0 and os.path.exists(stop_file) else 0])
    if hvd.broadcast(stop, 0, name=f"stop.{step}").item():
        break
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    step += 1
    time.sleep(0.01)
rank = hvd.rank()
hvd.shutdown()
print(f"rank {rank}: OK", flush=True)
