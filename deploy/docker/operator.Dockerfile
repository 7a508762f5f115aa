# khorovod-operator image. Build from the repository root:
#   podman build -f deploy/docker/operator.Dockerfile -t ghcr.io/khorovod/khorovod-operator:0.1.0 .
# The default (last) stage compiles the operator from source. The `prebuilt`
# target packages a binary built outside the image instead: its context is a
# directory holding prebuilt/bin/khorovod-operator (scripts/images.sh makes
# one from the test suite's own build, so the suite compiles nothing twice).
FROM debian:bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config libgloo-dev libcpp-httplib-dev nlohmann-json3-dev prometheus-cpp-dev \
      libyaml-cpp-dev libcli11-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
      -DKHOROVOD_BUILD_BENCHMARKS=OFF -DKHOROVOD_BUILD_PYTHON=OFF -DKHOROVOD_WITH_NCCL=OFF \
    && cmake --build /build --target khorovod-operator

FROM debian:bookworm-slim AS base
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libprometheus-cpp-core1.0 libyaml-cpp0.7 libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/khorovod-operator"]

FROM base AS prebuilt
COPY prebuilt/bin/khorovod-operator /usr/local/bin/khorovod-operator
USER 65532:65532

FROM base
COPY --from=build /build/bin/khorovod-operator /usr/local/bin/khorovod-operator
USER 65532:65532
