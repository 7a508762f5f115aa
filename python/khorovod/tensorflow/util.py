"""Small TensorFlow helpers shared by khorovod.tensorflow's modules (as
horovod.tensorflow.util): whether code runs eagerly, and names TensorFlow
accepts. Pure functions; thread-safe."""

import re

import tensorflow as tf


def _executing_eagerly():
    """True outside graph construction (tf.function traces are graphs)."""
    return tf.executing_eagerly()


def _normalize_name(name):
    """``name`` with every character TensorFlow refuses in op names replaced."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def _make_subgraph(f):
    return tf.function(f)


def _cache(f):
    """Caches f's result per argument tuple (Horovod uses it for subgraphs)."""
    cache = {}

    def wrapper(*args):
        key = (args, tf.executing_eagerly())
        if key not in cache:
            cache[key] = f(*args)
        return cache[key]

    return wrapper


def _var_key(var):
    """A hashable identity for a variable: tf.Variable.ref(), or the object
    itself for Keras 3 variables (hashed by identity, with no ref())."""
    return var.ref() if hasattr(var, "ref") else id(var)
