# Worker/runtime base image: khorovodrun, khorovod-rendezvous, libkhorovod,
# the example trainer and the slot entrypoint. Training images build FROM it
# (deploy/docker/pytorch.Dockerfile). Build from the repository root:
#   podman build -f deploy/docker/runtime.Dockerfile -t ghcr.io/khorovod/khorovod-runtime:0.1.0 .
# The default (last) stage compiles from source, CPU only (Gloo); for GPUs see
# deploy/docker/runtime-cuda.Dockerfile. The `prebuilt` target packages
# binaries built outside the image: its context holds prebuilt/bin/,
# prebuilt/lib/ and deploy/docker/slot-entrypoint.sh (scripts/images.sh).
FROM debian:bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config libgloo-dev libcpp-httplib-dev nlohmann-json3-dev prometheus-cpp-dev \
      libyaml-cpp-dev libcli11-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
      -DKHOROVOD_BUILD_BENCHMARKS=OFF -DKHOROVOD_BUILD_PYTHON=OFF -DKHOROVOD_WITH_NCCL=OFF \
    && cmake --build /build --target khorovodrun khorovod-rendezvous khorovod-example-trainer

FROM debian:bookworm-slim AS base
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgloo0 libcpp-httplib0.11 libprometheus-cpp-core1.0 libssl3 ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/docker/slot-entrypoint.sh /usr/local/bin/khorovod-slots
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/khorovod-slots"]

FROM base AS prebuilt
COPY prebuilt/bin/ /usr/local/bin/
COPY prebuilt/lib/ /usr/local/lib/
RUN ldconfig
USER 65532:65532

FROM base
COPY --from=build /build/bin/khorovodrun /build/bin/khorovod-rendezvous /build/bin/khorovod-example-trainer \
     /usr/local/bin/
COPY --from=build /build/lib/ /usr/local/lib/
RUN ldconfig
USER 65532:65532
