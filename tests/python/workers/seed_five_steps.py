# The five-step Horovod PyTorch pattern that users know, written as a
# Horovod user would (``import horovod.torch as hvd``). The test swaps only
# the import line for ``import khorovod.torch as hvd`` and runs it.
# One adaptation for CPU-only machines: the device is chosen with
# torch.cuda.is_available() instead of calling .cuda() unconditionally.
import horovod.torch as hvd
import torch

# 1. Initialize Horovod
hvd.init()

# 2. Pin the GPU to the local rank (one GPU per process), when there is one
device = torch.device("cpu")
if torch.cuda.is_available():
    torch.cuda.set_device(hvd.local_rank())
    device = torch.device("cuda", hvd.local_rank())

model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
model.to(device)

base_lr = 0.001
criterion = torch.nn.CrossEntropyLoss()

# 3. Scale the learning rate by the number of workers
optimizer = torch.optim.Adam(model.parameters(), lr=base_lr * hvd.size())

# 4. Wrap the optimizer with DistributedOptimizer
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

# 5. Broadcast the initial state from rank 0
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

# Partition the data with DistributedSampler
torch.manual_seed(0)
data = torch.randn(1000, 784)
labels = torch.randint(0, 10, (1000,))
dataset = torch.utils.data.TensorDataset(data, labels)
sampler = torch.utils.data.distributed.DistributedSampler(
    dataset, num_replicas=hvd.size(), rank=hvd.rank()
)
data_loader = torch.utils.data.DataLoader(dataset, batch_size=32, sampler=sampler)

model.train()
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(data_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
    if hvd.rank() == 0:
        print(f"Epoch {epoch}: loss={loss.item()}")
