# PyTorch worker image: the runtime image's programs (khorovodrun,
# khorovod-rendezvous, libkhorovod, khorovod-slots) plus Debian 12's python3,
# torch from the Python package index and khorovod's own wheel
# (khorovod.torch). A Horovod PyTorch script runs in it with only its import
# changed (`import khorovod.torch as hvd`). From the repository root:
#   pip wheel --no-deps -w wheel/ .            # or scripts/python-wheels.sh wheel/
#   podman build -f deploy/docker/pytorch.Dockerfile -t ghcr.io/khorovod/khorovod-pytorch:0.1.0 \
#     --build-arg RUNTIME=ghcr.io/khorovod/khorovod-runtime:0.1.0 [-v TORCH_WHEELS:/wheels:ro] .
# The build context must hold wheel/khorovod-*.whl and python/torch-pin.txt
# (the pinned torch and numpy). If a directory of pre-downloaded wheels is
# mounted at /wheels, pip installs from it alone (scripts/images.sh does
# that, so torch's ~3 GB are downloaded once); otherwise pip uses the index.
# torch is installed before the runtime's files are copied, so a new runtime
# rebuilds only the small layers on top of the cached torch layer.
ARG RUNTIME=ghcr.io/khorovod/khorovod-runtime:0.1.0
FROM ${RUNTIME} AS runtime

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgloo0 libcpp-httplib0.11 libprometheus-cpp-core1.0 libssl3 ca-certificates tini python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
COPY python/torch-pin.txt /tmp/torch-pin.txt
# Debian marks its python3 externally managed; this image is the environment.
RUN if [ -d /wheels ] && ls /wheels/torch-*.whl >/dev/null 2>&1; then src="--no-index --find-links /wheels"; else src=""; fi \
    && python3 -m pip install --no-cache-dir --break-system-packages $src -r /tmp/torch-pin.txt \
    && rm /tmp/torch-pin.txt
COPY --from=runtime /usr/local/bin/ /usr/local/bin/
COPY --from=runtime /usr/local/lib/ /usr/local/lib/
COPY wheel/ /tmp/khorovod-wheel/
RUN ldconfig && python3 -m pip install --no-cache-dir --break-system-packages --no-deps /tmp/khorovod-wheel/khorovod-*.whl \
    && rm -rf /tmp/khorovod-wheel && python3 -c "import torch, khorovod.torch"
USER 65532:65532
WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/khorovod-slots"]
