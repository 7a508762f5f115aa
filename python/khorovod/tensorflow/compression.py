"""Gradient compression for allreduce on TensorFlow tensors: none and fp16
(as horovod.tensorflow.compression).

Contract: ``compress(tensor) -> (tensor_to_send, ctx)`` and
``decompress(tensor, ctx) -> tensor`` in the original dtype. fp16 casts
floating-point tensors to float16 for the wire and back afterwards; other
dtypes pass through unchanged. Stateless; thread-safe.
"""

import tensorflow as tf


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
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tf.cast(tensor, ctx) if ctx is not None else tensor


class Compression:
    """The choices, named as in horovod: Compression.none, Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
