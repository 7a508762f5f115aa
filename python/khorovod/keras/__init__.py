"""khorovod.keras: horovod.keras's names (Horovod's multi-backend Keras
module); here the same as khorovod.tensorflow.keras, since Keras runs on
TensorFlow in both."""

from ..tensorflow.keras import *  # noqa: F401,F403
from ..tensorflow.keras import (DistributedOptimizer, PartialDistributedOptimizer, allgather,  # noqa: F401
                                allreduce, broadcast, load_model, reducescatter)
from ..tensorflow.keras import callbacks, elastic  # noqa: F401
