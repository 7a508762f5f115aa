"""Elastic training with torch: TorchState, ElasticSampler and run
(horovod.torch.elastic).

Contract:
- ``TorchState(model=None, optimizer=None, **kwargs)``: every keyword is
  an attribute (``state.epoch``) handled by type, as Horovod's registry
  (get_handler_registry/set_handler_registry): modules and optimizers keep
  deep copies of their state_dicts; samplers (ElasticSampler, any torch
  sampler with state_dict/load_state_dict and set_epoch, or with set_epoch
  only) keep their state and are re-sharded in place, under any name
  (``train_sampler=``, ``val_sampler=``); other values are deep-copied.
  Assigning a handled attribute (``state.model = m``) re-targets its
  handler. restore() loads the copies back; sync() broadcasts all of it
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

__all__ = [
    "TorchState",
    "ElasticSampler",
    "run",
    "StateHandler",
    "get_handler_registry",
    "set_handler_registry",
]


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
        self.processed_num = min(
            len(self.dataset), self._base + (batch_idx + 1) * batch_size * self.num_replicas
        )

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
        remaining = order[self.processed_num :]
        self._base = self.processed_num
        if remaining:
            per_rank = -(-len(remaining) // self.num_replicas)
            padded = remaining + remaining[: per_rank * self.num_replicas - len(remaining)]
            self.indices = padded[self.rank :: self.num_replicas]
        else:
            self.indices = []

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


class StateHandler:
    """How one kind of TorchState keyword is saved, restored and synced
    (horovod.torch.elastic.state's registry). ``saved`` is the last save()."""

    def __init__(self, value):
        self.value = value
        self.saved = None

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self, root_rank):
        raise NotImplementedError

    def set_value(self, value):
        self.value = value
        self.save()

    def nbytes(self):
        return 0


class ModelStateHandler(StateHandler):
    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)

    def sync(self, root_rank):
        functions.broadcast_parameters(self.value.state_dict(), root_rank=root_rank)

    def nbytes(self):
        return sum(
            t.numel() * t.element_size()
            for t in self.value.state_dict().values()
            if isinstance(t, torch.Tensor)
        )


class OptimizerStateHandler(StateHandler):
    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)

    def sync(self, root_rank):
        functions.broadcast_optimizer_state(self.value, root_rank=root_rank)

    def nbytes(self):
        return sum(
            v.numel() * v.element_size()
            for slots in self.value.state.values()
            for v in slots.values()
            if isinstance(v, torch.Tensor)
        )


class SamplerStateHandler(StateHandler):
    """A sampler with state_dict()/load_state_dict() (ElasticSampler, or any
    torch sampler that has them): loading the state re-shards it in place
    for the current world, so the DataLoader that holds it sees the change."""

    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self.saved))

    def sync(self, root_rank):
        state = functions.broadcast_object(
            self.value.state_dict(), root_rank=root_rank, name="elastic.sampler"
        )
        self.value.load_state_dict(state)


class EpochSamplerStateHandler(StateHandler):
    """A sampler with only set_epoch() (torch's DistributedSampler): its
    epoch is the state; on sync it is re-sharded in place over the new
    world (num_replicas, rank) when it has those attributes."""

    def save(self):
        self.saved = {"epoch": getattr(self.value, "epoch", 0)}

    def restore(self):
        self.value.set_epoch(self.saved["epoch"])

    def sync(self, root_rank):
        state = functions.broadcast_object(
            {"epoch": getattr(self.value, "epoch", 0)}, root_rank=root_rank, name="elastic.sampler"
        )
        sampler = self.value
        if hasattr(sampler, "num_replicas") and hasattr(sampler, "rank"):
            sampler.num_replicas = mpi_ops.CONTEXT.runtime().size()
            sampler.rank = mpi_ops.CONTEXT.runtime().rank()
            if hasattr(sampler, "dataset") and hasattr(sampler, "num_samples"):
                n = len(sampler.dataset)
                drop = getattr(sampler, "drop_last", False)
                sampler.num_samples = (
                    n // sampler.num_replicas if drop else -(-n // sampler.num_replicas)
                )
                sampler.total_size = sampler.num_samples * sampler.num_replicas
        sampler.set_epoch(state["epoch"])


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    """The (type, handler class) pairs TorchState dispatches keywords by, in order."""
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _handler_for(value):
    for handled_type, handler_cls in _handler_registry:
        if isinstance(value, handled_type):
            return handler_cls(value)
    if isinstance(value, torch.utils.data.Sampler) and hasattr(value, "set_epoch"):
        if hasattr(value, "state_dict") and hasattr(value, "load_state_dict"):
            return SamplerStateHandler(value)
        return EpochSamplerStateHandler(value)
    return None


class TorchState(State):
    def __init__(self, model=None, optimizer=None, **kwargs):
        object.__setattr__(self, "_handlers", {})
        super().__init__()
        kwargs = dict(kwargs, model=model, optimizer=optimizer)
        self._attr_names = []
        for name, value in kwargs.items():
            handler = _handler_for(value) if value is not None else None
            if handler is not None:
                self._handlers[name] = handler
            elif name not in ("model", "optimizer"):
                self._attr_names.append(name)
            object.__setattr__(self, name, value)
        self._saved = None
        self._checkpoint_path = None
        self._checkpoint_every = 1
        self.save()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)

    def _attrs(self):
        return {name: getattr(self, name) for name in self._attr_names}

    def checkpoint_to(self, path, every=1):
        """Keep every ``every``-th commit in ``path`` (see the module contract)."""
        self._checkpoint_path = path
        self._checkpoint_every = max(1, int(every))

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        self._saved = {
            "serial": self.commit_serial,
            "handlers": {name: h.saved for name, h in self._handlers.items()},
            "attrs": copy.deepcopy(self._attrs()),
        }
        self._write_checkpoint_if_due()

    def _load(self, saved):
        for name, handler in self._handlers.items():
            handler.saved = saved["handlers"][name]
            handler.restore()
        for name, value in copy.deepcopy(saved["attrs"]).items():
            object.__setattr__(self, name, value)
        self.commit_serial = saved["serial"]

    def restore(self):
        self._load(self._saved)

    def _write_checkpoint_if_due(self):
        serial = self._saved["serial"]
        if (
            self._checkpoint_path is None
            or serial == 0
            or serial % self._checkpoint_every
            or not mpi_ops.CONTEXT.is_initialized()
            or mpi_ops.CONTEXT.runtime().rank() != 0
        ):
            return
        tmp = f"{self._checkpoint_path}.tmp.{os.getpid()}"
        try:
            torch.save(self._saved, tmp)
            os.replace(tmp, self._checkpoint_path)
        except OSError as e:
            print(
                f"khorovod elastic: cannot write the checkpoint {self._checkpoint_path}: {e} "
                "(training goes on)",
                file=sys.stderr,
            )

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
        live = int(torch.argmax(every[:, 0]))  # argmax returns the first maximum
        disk = int(torch.argmax(every[:, 1]))
        if every[disk, 1] > every[live, 0]:
            if mpi_ops.CONTEXT.runtime().rank() == disk:
                print(
                    f"khorovod elastic: WARNING: no live worker holds a commit newer than "
                    f"{int(every[live, 0])}; resuming from the checkpoint {self._checkpoint_path} "
                    f"(commit {int(every[disk, 1])})",
                    file=sys.stderr,
                )
            return disk, True
        return live, False

    def synced_bytes(self):
        """Bytes of tensors sync() broadcasts (models and optimizer state)."""
        return sum(h.nbytes() for h in self._handlers.values())

    def sync(self):
        root, from_checkpoint = self._elect_source()
        if from_checkpoint and mpi_ops.CONTEXT.runtime().rank() == root:
            self._load(torch.load(self._checkpoint_path, weights_only=False))
        for handler in self._handlers.values():
            handler.sync(root)
        extra = {"attrs": self._attrs(), "serial": self.commit_serial}
        extra = functions.broadcast_object(extra, root_rank=root, name="elastic.torch_state")
        for name, value in extra["attrs"].items():
            object.__setattr__(self, name, value)
        self.commit_serial = extra["serial"]
        self.save()
