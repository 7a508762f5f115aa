"""Gradient compression for allreduce on torch tensors: none and fp16
(horovod.torch.compression), over khorovod.common.compression.
Stateless; thread-safe.
"""

import torch

from ..common.compression import Compressor, NoneCompressor, fp16_compressor

FP16Compressor = fp16_compressor(
    lambda t: t.dtype.is_floating_point and t.dtype != torch.float16,
    lambda t: t.to(torch.float16),
    lambda t, dtype: t.to(dtype),
)


class Compression:
    """The choices, named as in horovod: Compression.none, Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor


__all__ = ["Compression", "Compressor", "NoneCompressor", "FP16Compressor"]
