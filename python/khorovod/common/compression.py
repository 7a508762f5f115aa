"""Gradient compression for allreduce, written once for every framework:
none and fp16 (horovod's Compression.none and Compression.fp16).

Contract: ``compress(tensor) -> (tensor_to_send, ctx)`` and
``decompress(tensor, ctx) -> tensor`` in the original dtype. fp16 casts
floating-point tensors to float16 for the wire and back afterwards; other
dtypes pass through unchanged. A framework binding supplies the three
tensor operations (``fp16_compressor``); nothing here imports a framework.
Stateless; thread-safe.
"""


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


def fp16_compressor(is_wide_float, to_fp16, cast):
    """The fp16 Compressor over a framework's ``is_wide_float(tensor)`` (a
    floating-point dtype other than float16), ``to_fp16(tensor)`` and
    ``cast(tensor, dtype)``."""

    class FP16Compressor(Compressor):
        @staticmethod
        def compress(tensor):
            if is_wide_float(tensor):
                return to_fp16(tensor), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return cast(tensor, ctx) if ctx is not None else tensor

    return FP16Compressor
