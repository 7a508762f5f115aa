"""Elastic training with torch: TorchState, ElasticSampler and run
(horovod.torch.elastic).

Contract:
- ``TorchState(model=None, optimizer=None, sampler=None, **attrs)``: save()
  keeps deep copies of the model's and optimizer's state_dicts, the
  sampler's state and every keyword attribute (readable and writable as
  ``state.epoch``); restore() loads them back; sync() broadcasts all of it
  from the lowest rank holding the newest commit (each commit has a serial
  number, so a rank that rolled back or just joined never overwrites a peer
  that completed the step) and then saves, and re-shards the sampler for
  the new world. ``checkpoint_to(path, every=1)`` keeps every every-th
  commit in a file (written by rank 0 with torch.save, renamed into place);
  when every worker holding a newer commit is gone, sync() loads it,
  announces it on stderr, and broadcasts it instead of starting over.
- ``ElasticSampler(dataset, shuffle=True, seed=0)``: shards the samples not
  yet processed in this epoch across the current ranks (rank r takes every
  size-th one, the list padded to a multiple of size). ``record_batch(i,
  batch_size)`` after each step marks the first (i+1)*batch_size*size of
  them processed (true because of the interleaved sharding); after a
  re-formation the rest is re-sharded over the new ranks, so no sample is
  skipped and none is seen twice within an epoch (except padding).
  ``set_epoch(e)`` starts epoch e (a new permutation when shuffling).
- ``run`` is khorovod.elastic.run.

Thread-safety: training thread only.
"""

import copy
import os
import sys

import torch

from ..elastic import State, run
from . import functions, mpi_ops

__all__ = ["TorchState", "ElasticSampler", "run"]


class ElasticSampler(torch.utils.data.Sampler):
    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self._base = 0
        self.reset()

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.processed_num = 0
        self._base = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        self.processed_num = min(len(self.dataset),
                                 self._base + (batch_idx + 1) * batch_size * self.num_replicas)

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state):
        self.epoch = state["epoch"]
        self.processed_num = state["processed_num"]
        self.reset()

    def reset(self):
        """Re-shards the unprocessed samples for the current rank and size."""
        self.num_replicas = mpi_ops.CONTEXT.runtime().size()
        self.rank = mpi_ops.CONTEXT.runtime().rank()
        n = len(self.dataset)
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(n, generator=g).tolist()
        else:
            order = list(range(n))
        remaining = order[self.processed_num:]
        self._base = self.processed_num
        if remaining:
            per_rank = -(-len(remaining) // self.num_replicas)
            padded = remaining + remaining[:per_rank * self.num_replicas - len(remaining)]
            self.indices = padded[self.rank::self.num_replicas]
        else:
            self.indices = []

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


class TorchState(State):
    def __init__(self, model=None, optimizer=None, sampler=None, **attrs):
        super().__init__()
        self.model = model
        self.optimizer = optimizer
        self.sampler = sampler
        self._attr_names = list(attrs)
        for name, value in attrs.items():
            setattr(self, name, value)
        self._saved = None
        self._checkpoint_path = None
        self._checkpoint_every = 1
        self.save()

    def _attrs(self):
        return {name: getattr(self, name) for name in self._attr_names}

    def checkpoint_to(self, path, every=1):
        """Keep every ``every``-th commit in ``path`` (see the module contract)."""
        self._checkpoint_path = path
        self._checkpoint_every = max(1, int(every))

    def save(self):
        self._saved = {
            "serial": self.commit_serial,
            "model": copy.deepcopy(self.model.state_dict()) if self.model is not None else None,
            "optimizer": (copy.deepcopy(self.optimizer.state_dict())
                          if self.optimizer is not None else None),
            "sampler": self.sampler.state_dict() if self.sampler is not None else None,
            "attrs": copy.deepcopy(self._attrs()),
        }
        self._write_checkpoint_if_due()

    def _load(self, saved):
        if self.model is not None:
            self.model.load_state_dict(saved["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(saved["optimizer"])
        if self.sampler is not None:
            self.sampler.load_state_dict(saved["sampler"])
        for name, value in copy.deepcopy(saved["attrs"]).items():
            setattr(self, name, value)
        self.commit_serial = saved["serial"]

    def restore(self):
        self._load(self._saved)

    def _write_checkpoint_if_due(self):
        serial = self._saved["serial"]
        if (self._checkpoint_path is None or serial == 0 or serial % self._checkpoint_every
                or not mpi_ops.CONTEXT.is_initialized() or mpi_ops.CONTEXT.runtime().rank() != 0):
            return
        tmp = f"{self._checkpoint_path}.tmp.{os.getpid()}"
        try:
            torch.save(self._saved, tmp)
            os.replace(tmp, self._checkpoint_path)
        except OSError as e:
            print(f"khorovod elastic: cannot write the checkpoint {self._checkpoint_path}: {e} "
                  "(training goes on)", file=sys.stderr)

    def _checkpoint_serial(self):
        if self._checkpoint_path is None or not os.path.exists(self._checkpoint_path):
            return 0
        try:
            return int(torch.load(self._checkpoint_path, weights_only=False)["serial"])
        except Exception:  # an unreadable file is no checkpoint; sync says nothing of it
            return 0

    def _elect_source(self):
        """Collective: (root rank, whether root loads the checkpoint first)."""
        mine = torch.tensor([[self.commit_serial, self._checkpoint_serial()]], dtype=torch.int64)
        every = mpi_ops.allgather(mine, name="elastic.election")
        live = int(torch.argmax(every[:, 0]))      # argmax returns the first maximum
        disk = int(torch.argmax(every[:, 1]))
        if every[disk, 1] > every[live, 0]:
            if mpi_ops.CONTEXT.runtime().rank() == disk:
                print(f"khorovod elastic: WARNING: no live worker holds a commit newer than "
                      f"{int(every[live, 0])}; resuming from the checkpoint {self._checkpoint_path} "
                      f"(commit {int(every[disk, 1])})", file=sys.stderr)
            return disk, True
        return live, False

    def synced_bytes(self):
        """Bytes of tensors sync() broadcasts (model and optimizer state)."""
        tensors = list(self.model.state_dict().values()) if self.model is not None else []
        if self.optimizer is not None:
            for slots in self.optimizer.state.values():
                tensors.extend(v for v in slots.values() if isinstance(v, torch.Tensor))
        return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

    def sync(self):
        root, from_checkpoint = self._elect_source()
        if from_checkpoint and mpi_ops.CONTEXT.runtime().rank() == root:
            self._load(torch.load(self._checkpoint_path, weights_only=False))
        if self.model is not None:
            functions.broadcast_parameters(self.model.state_dict(), root_rank=root)
        if self.optimizer is not None:
            functions.broadcast_optimizer_state(self.optimizer, root_rank=root)
        extra = {"attrs": self._attrs(), "serial": self.commit_serial,
                 "sampler": self.sampler.state_dict() if self.sampler is not None else None}
        extra = functions.broadcast_object(extra, root_rank=root, name="elastic.torch_state")
        for name, value in extra["attrs"].items():
            setattr(self, name, value)
        self.commit_serial = extra["serial"]
        if self.sampler is not None:
            self.sampler.load_state_dict(extra["sampler"])
        self.save()
