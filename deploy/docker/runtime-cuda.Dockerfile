# GPU worker image (deploy/examples/horovodjob-gpu.yaml): khorovodrun,
# khorovod-rendezvous, libkhorovod with the NCCL backend, the slot entrypoint,
# python3, torch (CUDA build) and khorovod.torch. Build from the repository root:
#   podman build -f deploy/docker/runtime-cuda.Dockerfile -t ghcr.io/khorovod/khorovod-runtime-cuda:0.1.0 \
#     [-v TORCH_WHEELS:/wheels:ro] .
# CUDA and NCCL come from NVIDIA's wheels on the Python package index, as in
# scripts/install-cuda.sh: the build compiles against cudart/NCCL headers from
# those wheels; at run time libkhorovod uses the cudart and NCCL that torch's
# own wheel dependencies install (same sonames, libcudart.so.12 and
# libnccl.so.2), so the image carries one copy. No CUDA driver is inside: the
# node's NVIDIA container runtime mounts it, as for any CUDA image.
FROM debian:bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config libgloo-dev libcpp-httplib-dev nlohmann-json3-dev prometheus-cpp-dev \
      libyaml-cpp-dev libcli11-dev libssl-dev python3 python3-pip python3-dev python3-venv pybind11-dev git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN bash scripts/install-cuda.sh > /tmp/cuda-prefix && cuda=$(tail -1 /tmp/cuda-prefix) \
    && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
         -DKHOROVOD_BUILD_BENCHMARKS=OFF -DKHOROVOD_BUILD_PYTHON=OFF \
         -DKHOROVOD_WITH_NCCL=ON -DKHOROVOD_CUDA_ROOT="$cuda" \
    && cmake --build /build --target khorovodrun khorovod-rendezvous khorovod-example-trainer \
    && CMAKE_ARGS="-DKHOROVOD_WITH_NCCL=ON -DKHOROVOD_CUDA_ROOT=$cuda" \
         python3 -m pip wheel --no-deps -w /wheel .

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgloo0 libcpp-httplib0.11 libprometheus-cpp-core1.0 libssl3 ca-certificates tini python3 python3-pip \
    && rm -rf /var/lib/apt/lists/*
# torch (python/torch-pin.txt) and its NVIDIA wheels (cudart, NCCL, cuDNN, ...):
# from /wheels when a directory of pre-downloaded wheels is mounted there,
# else from the index.
COPY python/torch-pin.txt /tmp/torch-pin.txt
RUN if [ -d /wheels ] && ls /wheels/torch-*.whl >/dev/null 2>&1; then src="--no-index --find-links /wheels"; else src=""; fi \
    && python3 -m pip install --no-cache-dir --break-system-packages $src -r /tmp/torch-pin.txt \
    && nv=/usr/local/lib/python3.11/dist-packages/nvidia \
    && test -e $nv/cuda_runtime/lib/libcudart.so.12 && test -e $nv/nccl/lib/libnccl.so.2 \
    && printf '%s\n' $nv/cuda_runtime/lib $nv/nccl/lib > /etc/ld.so.conf.d/nvidia-wheels.conf
COPY --from=build /build/bin/khorovodrun /build/bin/khorovod-rendezvous /build/bin/khorovod-example-trainer \
     /usr/local/bin/
COPY --from=build /build/lib/ /usr/local/lib/
COPY --from=build /wheel/ /tmp/khorovod-wheel/
RUN ldconfig && python3 -m pip install --no-cache-dir --break-system-packages --no-deps /tmp/khorovod-wheel/khorovod-*.whl \
    && rm -rf /tmp/khorovod-wheel && khorovodrun --help >/dev/null && python3 -c "import khorovod.torch"
COPY deploy/docker/slot-entrypoint.sh /usr/local/bin/khorovod-slots
USER 65532:65532
WORKDIR /workspace
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/khorovod-slots"]
