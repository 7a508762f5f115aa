"""khorovod.keras: horovod.keras's names (Horovod's multi-backend Keras
module); here the same as khorovod.tensorflow.keras, since Keras runs on
TensorFlow in both."""

from ..tensorflow.keras import *  # noqa: F401,F403
from ..tensorflow.keras import (  # noqa: F401  # noqa: F401
    DistributedOptimizer,
    PartialDistributedOptimizer,
    allgather,
    allreduce,
    broadcast,
    callbacks,
    elastic,
    load_model,
    reducescatter,
)
