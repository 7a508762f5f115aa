"""Gradient compression for allreduce on TensorFlow tensors: none and fp16
(as horovod.tensorflow.compression), over khorovod.common.compression.
Stateless; thread-safe.
"""

import tensorflow as tf

from ..common.compression import Compressor, NoneCompressor, fp16_compressor

FP16Compressor = fp16_compressor(
    lambda t: t.dtype.is_floating and t.dtype != tf.float16,
    lambda t: tf.cast(t, tf.float16),
    tf.cast,
)


class Compression:
    """The choices, named as in horovod: Compression.none, Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor


__all__ = ["Compression", "Compressor", "NoneCompressor", "FP16Compressor"]
