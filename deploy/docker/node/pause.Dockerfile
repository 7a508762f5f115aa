# The pod sandbox ("pause") image of the real node (scripts/real-node.sh),
# made locally because no registry is reachable. containerd's CRI plugin
# names it as its sandbox_image. Build context: deploy/docker/node.
FROM debian:bookworm AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
COPY pause.c /src/pause.c
RUN gcc -O2 -static -Wall -Wextra -Werror -o /pause /src/pause.c && strip /pause

FROM scratch
COPY --from=build /pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
