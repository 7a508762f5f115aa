"""Gradient compression for allreduce: none and fp16 (horovod.torch.compression).

Contract: ``compress(tensor) -> (tensor_to_send, ctx)`` and
``decompress(tensor, ctx) -> tensor`` in the original dtype. fp16 casts
floating-point tensors to float16 for the wire and back afterwards; other
dtypes pass through unchanged. Stateless; thread-safe.
"""

import torch


class Compressor:
    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor.to(ctx) if ctx is not None else tensor


class Compression:
    """The choices, named as in horovod: Compression.none, Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
