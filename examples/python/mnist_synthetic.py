"""An MNIST-like classifier trained with khorovod.torch on generated data.

Ten 28x28 "digit" templates (random strokes, fixed by --seed) are the
classes; each sample is a template shifted by up to two pixels plus noise,
so the task needs a little generalisation but no download. The training
loop is elastic (TorchState, ElasticSampler, @hvd.elastic.run), and works
unchanged in a static job:

    khorovodrun -np 2 /usr/bin/python3 examples/python/mnist_synthetic.py
    khorovodrun -np 4 --min-np 2 --max-np 4 /usr/bin/python3 examples/python/mnist_synthetic.py \
        --fail-at-commit 5

With --fail-at-commit the first worker-1 kills itself; khorovodrun starts a
replacement that joins at a later commit. (If the job finishes before the
replacement has joined, khorovodrun currently waits for that replacement
until --elastic-timeout; see docs/python.md.)

Rank 0 prints the loss and the held-out accuracy after every epoch and
finally 'final accuracy A'.
"""

import argparse
import os
import signal

import khorovod.torch as hvd
import torch
import torch.nn.functional as F


def make_data(n, seed, templates):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    images = templates[labels].clone()
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    for i in range(n):
        images[i] = torch.roll(
            images[i], shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2)
        )
    images += 0.6 * torch.randn(images.shape, generator=g)
    return images, labels


def make_templates(seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.zeros(10, 1, 28, 28)
    for c in range(10):
        for _ in range(4):  # four random strokes per class
            r, col = torch.randint(4, 24, (2,), generator=g).tolist()
            if torch.rand(1, generator=g).item() < 0.5:
                t[c, 0, r, max(col - 6, 0) : col + 6] = 1.0
            else:
                t[c, 0, max(r - 6, 0) : r + 6, col] = 1.0
    return t


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(8, 16, 5, padding=2)
        self.fc = torch.nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--train-size", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--fail-at-commit",
        type=int,
        default=0,
        help="the first worker-1 SIGKILLs itself after this many commits "
        "(to watch an elastic job recover)",
    )
    args = p.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    templates = make_templates(args.seed)
    train_x, train_y = make_data(args.train_size, args.seed + 1, templates)
    test_x, test_y = make_data(1024, args.seed + 2, templates)
    dataset = torch.utils.data.TensorDataset(train_x, train_y)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=args.seed)
    state = hvd.elastic.TorchState(
        model=model, optimizer=optimizer, sampler=sampler, epoch=0, batch=0, commits=0
    )

    def on_reset():  # the world size changed: keep lr proportional to it
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    state.register_reset_callbacks([on_reset])

    def evaluate():
        model.eval()
        with torch.no_grad():
            correct = (model(test_x).argmax(1) == test_y).float().mean()
        model.train()
        return hvd.allreduce(correct, name="accuracy").item()

    @hvd.elastic.run
    def train(state):
        accuracy = 0.0
        while state.epoch < args.epochs:
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=args.batch_size, sampler=sampler
            )
            total, batches = 0.0, 0
            for state.batch, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                sampler.record_batch(state.batch, args.batch_size)
                total, batches = total + loss.item(), batches + 1
                if state.batch % 16 == 15:
                    state.commit()
                    state.commits += 1
                    if (
                        state.commits == args.fail_at_commit
                        and os.environ.get("KHOROVOD_WORKER_NAME") == "worker-1"
                    ):
                        print("worker-1: simulating a crash", flush=True)
                        os.kill(os.getpid(), signal.SIGKILL)
            accuracy = evaluate()
            mean_loss = hvd.allreduce(torch.tensor(total / max(batches, 1)), name="loss").item()
            if hvd.rank() == 0:
                print(
                    f"epoch {state.epoch}: loss {mean_loss:.4f}  accuracy {accuracy:.3f}  "
                    f"world {hvd.size()}",
                    flush=True,
                )
            state.epoch += 1
            state.batch = 0
            sampler.set_epoch(state.epoch)
            state.commit()
        return accuracy

    accuracy = train(state)
    if hvd.rank() == 0:
        print(f"final accuracy {accuracy:.3f}", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
