"""horovod.keras.elastic: khorovod.tensorflow.keras.elastic."""

from ..tensorflow.keras.elastic import *  # noqa: F401,F403
from ..tensorflow.keras.elastic import run  # noqa: F401
