# TensorFlow worker image: the runtime image's programs (khorovodrun,
# khorovod-rendezvous, libkhorovod, khorovod-slots) plus Debian 12's python3,
# PyPI's tensorflow-cpu (Keras 3), tf-keras (Keras 2, for scripts run with
# TF_USE_LEGACY_KERAS=1) and khorovod's own wheel built with the TensorFlow
# ops (khorovod.tensorflow, khorovod.tensorflow.keras, khorovod.keras). A
# Horovod TensorFlow or Keras script runs in it with only its import
# changed (`import khorovod.tensorflow.keras as hvd`). No torch. From the
# repository root:
#   scripts/python-wheels.sh --tensorflow wheel/   # pip wheel . against the pinned TensorFlow
#   podman build -f deploy/docker/tensorflow.Dockerfile -t ghcr.io/khorovod/khorovod-tensorflow:0.1.0 \
#     --build-arg RUNTIME=ghcr.io/khorovod/khorovod-runtime:0.1.0 [-v TF_WHEELS:/wheels:ro] .
# The build context must hold wheel/khorovod-*.whl (built against the
# TensorFlow of python/tensorflow-pin.txt: its ops link to that version),
# python/tensorflow-pin.txt, python/tf-keras-pin.txt and
# examples/python/keras_mnist_elastic.py (the example that
# deploy/examples/horovodjob-keras.yaml runs, in /usr/local/share/khorovod/examples). Only the pin's
# tensorflow-cpu and numpy lines are installed (the rest are test tools). If
# a directory of pre-downloaded wheels is mounted at /wheels, pip installs
# from it alone (scripts/images.sh mounts ~/.cache/khorovod/wheels/
# tensorflow-cpu-<version>); otherwise pip uses the index.
# TensorFlow's C++ headers (tensorflow/include, about 290 MB) are removed:
# they serve only to compile custom ops, and khorovod's come compiled in the
# wheel. TensorFlow is installed before the runtime's files are copied, so a
# new runtime or wheel rebuilds only the small layers on top of it.
ARG RUNTIME=ghcr.io/khorovod/khorovod-runtime:0.1.0
FROM ${RUNTIME} AS runtime

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgloo0 libcpp-httplib0.11 libprometheus-cpp-core1.0 libssl3 ca-certificates tini python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
COPY python/tensorflow-pin.txt python/tf-keras-pin.txt /tmp/pins/
# Debian marks its python3 externally managed; this image is the environment.
RUN if [ -d /wheels ] && ls /wheels/tensorflow_cpu-*.whl >/dev/null 2>&1; then src="--no-index --find-links /wheels"; else src=""; fi \
    && grep -E '^(tensorflow-cpu|numpy)==' /tmp/pins/tensorflow-pin.txt > /tmp/pins/image.txt \
    && python3 -m pip install --no-cache-dir --break-system-packages $src -r /tmp/pins/image.txt \
    && python3 -m pip install --no-cache-dir --break-system-packages --no-deps $src -r /tmp/pins/tf-keras-pin.txt \
    && rm -rf /tmp/pins /usr/local/lib/python3*/dist-packages/tensorflow/include
COPY --from=runtime /usr/local/bin/ /usr/local/bin/
COPY --from=runtime /usr/local/lib/ /usr/local/lib/
COPY wheel/ /tmp/khorovod-wheel/
RUN ldconfig && python3 -m pip install --no-cache-dir --break-system-packages --no-deps /tmp/khorovod-wheel/khorovod-*.whl \
    && rm -rf /tmp/khorovod-wheel \
    && TF_CPP_MIN_LOG_LEVEL=2 python3 -c "import tensorflow, khorovod.tensorflow.keras, khorovod.keras" \
    && install -d -o 65532 -g 65532 /workspace
COPY examples/python/keras_mnist_elastic.py /usr/local/share/khorovod/examples/
# Keras keeps its settings under $HOME/.keras; the worker's user has no home.
# /workspace belongs to that user: Horovod's scripts write checkpoints to
# their working directory.
ENV KERAS_HOME=/tmp/.keras
USER 65532:65532
WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/khorovod-slots"]
