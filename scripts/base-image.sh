#!/usr/bin/env bash
# Makes the local base images the Dockerfiles in deploy/docker/ start FROM,
# since no container registry is reachable from this project's machines:
#   debian:bookworm       a minbase Debian 12 root filesystem from debootstrap,
#                         fetched from the mirror apt already uses;
#   debian:bookworm-slim  the same without documentation, man pages and
#                         locales (as Debian's own -slim images).
# The root filesystem tarball is cached outside the clone, keyed by suite and
# month (~/.cache/khorovod/images/debian-bookworm-YYYYMM.tar), so debootstrap
# runs once a month; an image already imported from that tarball is kept.
# Needs root, debootstrap and podman. Prints the two image names.
set -euo pipefail
cache=${KHOROVOD_IMAGE_CACHE:-$HOME/.cache/khorovod/images}
suite=bookworm
key="debian-$suite-$(date -u +%Y%m)"
tarball="$cache/$key.tar"
mkdir -p "$cache"
for tool in debootstrap podman; do
  command -v "$tool" >/dev/null || { echo "base-image: $tool is required (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

# The mirror apt uses (deb822 sources first, then the one-line format).
mirror() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                         | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$uri" ] || { echo "base-image: no Debian mirror found in /etc/apt/sources.list*" >&2; return 1; }
  echo "$uri"
}

make_rootfs() {
  local work; work=$(mktemp -d /var/tmp/khorovod-rootfs.XXXXXX)
  trap 'rm -rf "$work"' RETURN
  local uri; uri=$(mirror)
  echo "base-image: debootstrap $suite (minbase) from the apt mirror" >&2
  debootstrap --variant=minbase --include=ca-certificates "$suite" "$work/root" "$uri" > "$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; echo "base-image: debootstrap failed" >&2; return 1; }
  # The image's apt sources: the same mirror plus security updates.
  cat > "$work/root/etc/apt/sources.list" <<EOF
deb $uri $suite main
deb $uri $suite-updates main
deb ${uri%/debian}/debian-security $suite-security main
EOF
  rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/"*.bin "$work/root/var/log/"*
  tar -C "$work/root" --numeric-owner -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
}

# import NAME: imports the tarball as NAME unless NAME already came from it.
import() {
  local have; have=$(podman image inspect --format '{{index .Labels "dev.khorovod.base"}}' "$1" 2>/dev/null || true)
  [ "$have" = "$key" ] && return 0
  echo "base-image: importing $1" >&2
  podman import --quiet --change "LABEL dev.khorovod.base=$key" --change 'CMD ["bash"]' "$2" "$1" >/dev/null
}

[ -s "$tarball" ] || make_rootfs
import debian:$suite "$tarball"

# -slim: the same files less docs, man pages and locales.
slim="$cache/$key-slim.tar"
if [ ! -s "$slim" ]; then
  work=$(mktemp -d /var/tmp/khorovod-slim.XXXXXX)
  tar -C "$work" -xf "$tarball"
  rm -rf "$work"/usr/share/doc/* "$work"/usr/share/man/* "$work"/usr/share/info/* "$work"/usr/share/locale/*
  mkdir -p "$work/etc/dpkg/dpkg.cfg.d"
  printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-exclude /usr/share/locale/*\n' \
    > "$work/etc/dpkg/dpkg.cfg.d/docker-slim"
  tar -C "$work" --numeric-owner -cf "$slim.tmp" . && mv "$slim.tmp" "$slim"
  rm -rf "$work"
fi
import debian:$suite-slim "$slim"
echo "debian:$suite debian:$suite-slim"
