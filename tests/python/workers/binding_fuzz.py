"""A seeded fuzzer of khorovod.torch's collectives, run by every rank alike
(issue 28: "fuzz the Python binding's inputs"). In the ASan build it runs with
the sanitizer preloaded, so a memory error in the binding or the runtime ends
the job instead of passing unseen.

Every rank draws the same sequence of calls from one seed: a collective,
dtype, shape (empty and 0-d included), layout (non-contiguous too), name
(none, empty, unicode, long, reused), op, scale factors and root. Some calls
are wrong on purpose: inputs that differ between ranks (shape, dtype, op,
root), a bad root, splits that do not add up, a non-tensor argument. For each
call the fuzzer knows what every rank holds, so a call that should work must
give exactly the reference result, and a call that should fail must raise one
of the exceptions Horovod raises on every rank, after which the job goes on.
Anything else (a wrong answer, a crash, a hang) fails the job.

Usage: binding_fuzz.py SEED ITERATIONS. Prints "fuzz: N calls, K refused: OK".
"""

import os
import random
import sys

import khorovod.torch as hvd
import torch

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int32,
    torch.int64,
    torch.int8,
    torch.uint8,
]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
EXPECTED_ERRORS = (ValueError, TypeError, RuntimeError, hvd.HorovodInternalError, torch.FatalError)
# Horovod itself answers a non-tensor with the AttributeError of tensor.new().
VERBOSE = bool(os.environ.get("KHOROVOD_FUZZ_VERBOSE"))
NAMES = [None, "", "t", "ü∂ñ", "x" * 300, "same"]


def tensor_for(rng_seed, rank, dtype, shape):
    """The deterministic tensor a rank contributes: small integers, so sums
    and products are exact in every dtype."""
    g = torch.Generator().manual_seed(rng_seed * 97 + rank)
    low, high = (1, 3) if dtype == torch.uint8 else (-2, 3)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def draw_shape(rng):
    kind = rng.random()
    if kind < 0.1:
        return ()
    if kind < 0.2:
        return (0,) + tuple(rng.randint(1, 3) for _ in range(rng.randint(0, 2)))
    return tuple(rng.randint(1, 9) for _ in range(rng.randint(1, 3)))


def maybe_noncontiguous(t, rng):
    if t.dim() >= 2 and rng.random() < 0.3:
        return t.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    return t


class Call:
    """One drawn collective: its inputs on every rank and whether it is valid."""

    def __init__(self, rng, size, index):
        self.kind = rng.choice(
            [
                "allreduce",
                "allreduce_",
                "grouped_allreduce",
                "allgather",
                "broadcast",
                "broadcast_",
                "alltoall",
                "reducescatter",
                "not_a_tensor",
            ]
        )
        self.dtype = rng.choice(DTYPES)
        self.shape = draw_shape(rng)
        self.seed = index
        self.name = rng.choice(NAMES)
        if self.name is not None:
            self.name = f"{self.name}.{index}" if rng.random() < 0.8 else self.name
        self.op = rng.choice([hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product])
        self.prescale = rng.choice([1.0, 1.0, 0.5, 2.0])
        self.postscale = rng.choice([1.0, 1.0, 0.25, 3.0])
        self.root = rng.randint(0, size - 1) if rng.random() < 0.95 else rng.choice([-1, size])
        self.mismatch = rng.choice([None] * 8 + ["shape", "dtype", "op", "root"])
        self.split_error = rng.random() < 0.1
        self.noncontig_rng = random.Random(index)

    def input(self, rank):
        shape, dtype = self.shape, self.dtype
        if self.mismatch == "shape" and rank == 1:
            shape = tuple(d + 1 for d in shape) if shape else (2,)
        if self.mismatch == "dtype" and rank == 1:
            dtype = torch.float64 if dtype != torch.float64 else torch.int32
        return tensor_for(self.seed, rank, dtype, shape)

    def op_on(self, rank):
        if self.mismatch == "op" and rank == 1:
            return hvd.Max if self.op != hvd.Max else hvd.Min
        return self.op

    def root_on(self, rank):
        # Only a valid root differs between ranks: a rank refuses a bad root
        # before submitting, and a program where only some ranks refuse stalls.
        if self.mismatch == "root" and rank == 1 and 0 <= self.root < hvd.size():
            return (self.root + 1) % hvd.size()
        return self.root


def scaled(t, factor):
    return t.double() * factor


def reduce_reference(inputs, op, pre, post):
    stacked = torch.stack([scaled(t, pre) for t in inputs])
    if op == hvd.Sum:
        out = stacked.sum(0)
    elif op == hvd.Average:
        out = stacked.sum(0) / len(inputs)
    elif op == hvd.Min:
        out = stacked.min(0).values
    elif op == hvd.Max:
        out = stacked.max(0).values
    else:
        out = stacked.prod(0)
    return out * post


def split_rows(n, size):
    """Horovod's reducescatter split: as even as possible, the first ranks
    taking one row more."""
    return [n // size + (1 if r < n % size else 0) for r in range(size)]


def splits_for(call, rank, size, rows):
    g = random.Random(call.seed * 31 + rank)
    cuts = sorted(g.randint(0, rows) for _ in range(size - 1))
    splits = [b - a for a, b in zip([0] + cuts, cuts + [rows])]
    if call.split_error:
        splits[-1] += 1
    return splits


def expected(call, rank, size):
    """(valid, reference result or None). valid is None where Horovod's own
    answer is not pinned down (then an error or the reference both pass)."""
    inputs = [call.input(r) for r in range(size)]
    scalar = len(call.shape) == 0
    kind = call.kind
    if kind.startswith("allreduce") or kind == "grouped_allreduce":
        if call.mismatch in ("shape", "dtype", "op"):
            return False, None
        return True, reduce_reference(inputs, call.op, call.prescale, call.postscale)
    if kind.startswith("broadcast"):
        if not 0 <= call.root < size or call.mismatch in ("shape", "dtype", "root"):
            return False, None
        return True, inputs[call.root].double()
    if kind == "allgather":
        if call.mismatch == "dtype":
            return False, None
        if scalar:
            return None, None
        if call.mismatch == "shape" and len(call.shape) > 1:
            return False, None
        return True, torch.cat([t.double() for t in inputs])
    if kind == "alltoall":
        if scalar:
            return None, None
        ragged_rows = call.mismatch == "shape" and len(call.shape) == 1  # dim 0 may differ
        if (
            call.split_error
            or call.mismatch == "dtype"
            or (call.mismatch == "shape" and not ragged_rows)
        ):
            return False, None
        parts = [
            torch.split(t.double(), splits_for(call, r, size, t.shape[0]))
            for r, t in enumerate(inputs)
        ]
        return True, torch.cat([parts[r][rank] for r in range(size)])
    if kind == "reducescatter":
        if scalar or call.op not in (hvd.Sum, hvd.Average):
            return None, None
        if call.mismatch in ("shape", "dtype", "op"):
            return False, None
        full = reduce_reference(inputs, call.op, call.prescale, call.postscale)
        return True, torch.split(full, split_rows(full.shape[0], size))[rank]
    return False, None  # not_a_tensor: always refused


def run(call, t, rank, size):
    op, kw = call.op_on(rank), {"name": call.name}
    scale = {"prescale_factor": call.prescale, "postscale_factor": call.postscale}
    if call.kind == "allreduce":
        return hvd.allreduce(t, op=op, **scale, **kw)
    if call.kind == "allreduce_":
        return hvd.allreduce_(t, op=op, **scale, **kw)
    if call.kind == "grouped_allreduce":
        return hvd.grouped_allreduce([t], op=op, **scale, **kw)[0]
    if call.kind == "allgather":
        return hvd.allgather(t, **kw)
    if call.kind == "broadcast":
        return hvd.broadcast(t, call.root_on(rank), **kw)
    if call.kind == "broadcast_":
        return hvd.broadcast_(t, call.root_on(rank), **kw)
    if call.kind == "alltoall":
        rows = t.shape[0] if t.dim() else 0
        out = hvd.alltoall(
            t, splits=torch.tensor(splits_for(call, rank, size, rows), dtype=torch.int32), **kw
        )
        return out[0] if isinstance(out, tuple) else out
    if call.kind == "reducescatter":
        return hvd.reducescatter(t, op=op, **scale, **kw)
    return hvd.allreduce(rng_choice_not_tensor(call.seed), **kw)


def rng_choice_not_tensor(seed):
    return random.Random(seed).choice([None, [1.0, 2.0], "tensor", 3.5, object()])


def fix_draw(call):
    """Keeps drawn calls inside what the reference can state exactly:
    integers get no scaling or averaging (Horovod leaves their rounding
    unstated), products stay small."""
    if call.mismatch == "shape" and not call.shape:
        # A 0-d tensor against a 1-d one is refused by some ranks before
        # submission and not by others: a program that does that stalls
        # (with the stall warning) in Horovod as here; that is not fuzzing.
        call.mismatch = None
    if call.dtype not in FLOATS:
        call.prescale = call.postscale = 1.0
        if call.op == hvd.Average:
            call.op = hvd.Sum
    return call


def close(result, reference, dtype):
    if result.shape != reference.shape:
        return False
    tol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
    return torch.allclose(result.double(), reference, rtol=tol, atol=tol)


def main():
    seed, iterations = int(sys.argv[1]), int(sys.argv[2])
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    rng = random.Random(seed)
    refused = 0
    for i in range(iterations):
        call = fix_draw(Call(rng, size, i))
        valid, reference = expected(call, rank, size)
        t = maybe_noncontiguous(call.input(rank), call.noncontig_rng)
        if VERBOSE:
            print(
                f"fuzz: call {i}: {call.kind} {call.dtype} {call.shape} mismatch={call.mismatch} "
                f"root={call.root} split_error={call.split_error} name={call.name!r:.20}",
                flush=True,
            )
        try:
            result = run(call, t, rank, size)
        except EXPECTED_ERRORS + ((AttributeError,) if call.kind == "not_a_tensor" else ()) as e:  # noqa: B030
            if valid:
                sys.exit(
                    f"fuzz: call {i} ({call.kind} {call.dtype} {call.shape} {call.mismatch}) "
                    f"should work but raised {type(e).__name__}: {e}"
                )
            refused += 1
            continue
        if valid is False:
            sys.exit(
                f"fuzz: call {i} ({call.kind} {call.dtype} {call.shape} mismatch={call.mismatch} "
                f"root={call.root}) should have raised"
            )
        if reference is not None and not close(result, reference, call.dtype):
            sys.exit(
                f"fuzz: call {i} ({call.kind} {call.dtype} {call.shape}) wrong result: "
                f"{result.flatten()[:8]} vs {reference.flatten()[:8]}"
            )
    hvd.barrier()
    print(f"fuzz: rank {rank}: {iterations} calls, {refused} refused: OK", flush=True)


if __name__ == "__main__":
    main()
