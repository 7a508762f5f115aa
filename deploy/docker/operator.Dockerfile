# khorovod-operator image. Build from the repository root:
#   docker build -f deploy/docker/operator.Dockerfile -t ghcr.io/khorovod/khorovod-operator:0.1.0 .
# (No container engine runs on the project's CI machines: this file is not
# built there. The binary it packages is the one the tests run.)
FROM debian:bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config libgloo-dev libcpp-httplib-dev nlohmann-json3-dev \
      libyaml-cpp-dev libcli11-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKHOROVOD_BUILD_TESTS=OFF \
      -DKHOROVOD_BUILD_BENCHMARKS=OFF \
    && cmake --build /build --target khorovod-operator

FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libcpp-httplib0.11 libyaml-cpp0.7 libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/bin/khorovod-operator /usr/local/bin/khorovod-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/khorovod-operator"]
