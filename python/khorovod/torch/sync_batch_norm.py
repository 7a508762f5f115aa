"""SyncBatchNorm: batch normalization with statistics over every rank's
batch (horovod.torch.SyncBatchNorm).

Contract: a drop-in for torch.nn.BatchNorm{1,2,3}d. In training, the mean
and variance are those of the concatenation of all ranks' batches: each
rank's per-channel sum, sum of squares and count travel in one
differentiable allreduce (Sum), so backward is exact through autograd (the
allreduce's gradient is the allreduce of the gradient). Running statistics
are updated with the global unbiased variance, identically on every rank.
In eval mode, or with a single rank, it is plain batch norm. Every rank
must call forward the same number of times, in the same order.

Thread-safety: as a torch module.
"""

import torch
import torch.nn.functional as F

from . import autograd_ops, mpi_ops


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(
                f"khorovod: SyncBatchNorm expects at least 2D input (got {input.dim()}D)"
            )

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or mpi_ops.CONTEXT.runtime().size() == 1:
            return super().forward(input)
        if self.momentum is None:
            self.num_batches_tracked += 1
            factor = 1.0 / float(self.num_batches_tracked)
        else:
            factor = self.momentum
            if self.track_running_stats:
                self.num_batches_tracked += 1
        channels = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        count = torch.tensor([input.numel() // channels], dtype=input.dtype, device=input.device)
        local = torch.cat([input.sum(dims), (input * input).sum(dims), count])
        total = autograd_ops.allreduce(local, op=mpi_ops.Sum)
        n = total[2 * channels]
        mean = total[:channels] / n
        var = (total[channels : 2 * channels] / n - mean * mean).clamp_min(0)
        if self.track_running_stats and self.running_mean is not None:
            with torch.no_grad():
                unbiased = var * (n / (n - 1)) if n > 1 else var
                self.running_mean.mul_(1 - factor).add_(mean.detach() * factor)
                self.running_var.mul_(1 - factor).add_(unbiased.detach() * factor)
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out


__all__ = ["SyncBatchNorm"]
del F
