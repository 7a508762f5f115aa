# PyTorch worker image: the runtime image (khorovodrun, khorovod-rendezvous,
# libkhorovod, khorovod-slots) plus Debian 12's python3, torch from the Python
# package index and khorovod's own wheel (khorovod.torch). A Horovod PyTorch
# script runs in it with only its import changed (`import khorovod.torch as hvd`).
#   pip wheel --no-deps -w wheel/ .            # from the repository root
#   podman build -f deploy/docker/pytorch.Dockerfile -t ghcr.io/khorovod/khorovod-pytorch:0.1.0 \
#     --build-arg BASE=ghcr.io/khorovod/khorovod-runtime:0.1.0 [-v TORCH_WHEELS:/wheels:ro] .
# The build context must hold wheel/khorovod-*.whl. If a directory of
# pre-downloaded wheels is mounted at /wheels, pip installs from it alone
# (scripts/images.sh does that, so torch's ~3 GB are downloaded once);
# otherwise pip fetches torch from the index.
ARG BASE=ghcr.io/khorovod/khorovod-runtime:0.1.0
FROM ${BASE}
ARG TORCH_VERSION=2.9.1
USER root
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
COPY wheel/ /tmp/khorovod-wheel/
# Debian marks its python3 externally managed; this image is the environment.
RUN if [ -d /wheels ] && ls /wheels/torch-*.whl >/dev/null 2>&1; then src="--no-index --find-links /wheels"; else src=""; fi \
    && python3 -m pip install --no-cache-dir --break-system-packages $src "torch==${TORCH_VERSION}" numpy \
    && python3 -m pip install --no-cache-dir --break-system-packages --no-deps /tmp/khorovod-wheel/khorovod-*.whl \
    && rm -rf /tmp/khorovod-wheel \
    && python3 -c "import torch, khorovod.torch"
USER 65532:65532
WORKDIR /workspace
