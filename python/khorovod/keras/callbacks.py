"""horovod.keras.callbacks: khorovod.tensorflow.keras.callbacks."""

from ..tensorflow.keras.callbacks import *  # noqa: F401,F403
