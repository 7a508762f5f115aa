# Worker/runtime base image: khorovodrun, khorovod-rendezvous, libkhorovod,
# the example trainer and the slot entrypoint. Training images build FROM it.
#   docker build -f deploy/docker/runtime.Dockerfile -t ghcr.io/khorovod/khorovod-runtime:0.1.0 .
# (Not built on the project's CI machines, which have no container engine.)
# For GPUs, build FROM an image with CUDA and NCCL instead (see docs/gpu.md).
FROM debian:bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config libgloo-dev libcpp-httplib-dev nlohmann-json3-dev \
      libyaml-cpp-dev libcli11-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
      -DKHOROVOD_BUILD_BENCHMARKS=OFF \
    && cmake --build /build --target khorovodrun khorovod-rendezvous khorovod-example-trainer

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgloo0 libcpp-httplib0.11 libssl3 ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/bin/khorovodrun /build/bin/khorovod-rendezvous /build/bin/khorovod-example-trainer \
     /usr/local/bin/
COPY --from=build /build/lib/ /usr/local/lib/
COPY deploy/docker/slot-entrypoint.sh /usr/local/bin/khorovod-slots
RUN ldconfig
USER 65532:65532
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/khorovod-slots"]
