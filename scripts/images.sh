#!/usr/bin/env bash
# Builds khorovod's container images with podman (no registry needed: the
# base images come from scripts/base-image.sh) and loads them into the real
# node's containerd (scripts/real-node.sh).
#
#   images.sh node                 the node's own images: pause, CoreDNS
#   images.sh prebuilt BUILD_DIR   operator + runtime from BUILD_DIR/{bin,lib}
#                                  (the Dockerfiles' `prebuilt` targets) and the
#                                  PyTorch and TensorFlow workers on top (each
#                                  needs its khorovod wheel, see below); what the
#                                  test suite uses
#   images.sh prebuilt-core BUILD_DIR   the same without the Python workers
#   images.sh monitoring           prometheus-operator, its config reloader and
#                                  Prometheus from the binaries scripts/k8s-tools.sh
#                                  builds; prints the three image names
#   images.sh source [NAME...]     every shipped Dockerfile's default (from-source)
#                                  stage, the CUDA worker included (the Python
#                                  workers on the from-source runtime); prints times.
#                                  Tagged localhost/khorovod-source/NAME:0.1.0, so
#                                  they never replace the suite's images
#   images.sh load NAME...         import images into the node's containerd
#                                  (namespace k8s.io), unless already there
#
# Every image is recorded with a hash of its inputs (Dockerfile, target, build
# arguments, context files, base images); a build whose inputs are unchanged
# is skipped. Builds use the host network (apt and pip inside RUN steps) and
# rlimits at the machine's hard limits or below (CAP_SYS_RESOURCE is withheld).
# torch (python/torch-pin.txt) and its NVIDIA wheels are downloaded once
# into ~/.cache/khorovod/wheels/torch-<version> (scripts/python-wheels.sh)
# and reach builds through a read-only volume, so no build downloads them again;
# so do tensorflow-cpu's (python/tensorflow-pin.txt, ~/.cache/khorovod/wheels/
# tensorflow-cpu-<version>, tests/python/tensorflow/run.sh --download-only).
# Environment: KHOROVOD_WHEEL_DIR: a directory with the khorovod wheel
# (default: build it with `pip wheel .` into ~/.cache/khorovod/wheels/khorovod-<hash>);
# KHOROVOD_TF_WHEEL_DIR: the same for the TensorFlow worker's wheel, built
# with the TensorFlow ops (default: scripts/python-wheels.sh --tensorflow
# into ~/.cache/khorovod/wheels/khorovod-tf-<hash>).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${KHOROVOD_IMAGE_CACHE:-$HOME/.cache/khorovod/images}
TAG=0.1.0
REGISTRY=ghcr.io/khorovod
SOCK=${KHOROVOD_NODE_DIR:-/var/lib/khorovod-node}/run/containerd.sock
mkdir -p "$cache"
say() { echo "images: $*" >&2; }
die() { say "$*"; exit 1; }
command -v podman >/dev/null || die "podman is required (scripts/install-deps.sh installs it)"
build_flags=(--network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --layers)
# pip inside builds trusts what the host's pip trusts (a machine may reach the
# package index through a TLS proxy with its own CA): the host's CA bundle
# and a pip.conf naming it are mounted for the build only, never committed.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$cache/pip-conf"
  printf '[global]\ncert = /etc/khorovod-build-ca.crt\n' > "$cache/pip-conf/pip.conf"
  build_flags+=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/khorovod-build-ca.crt:ro
                --volume "$cache/pip-conf/pip.conf:/etc/pip.conf:ro")
fi

# inputs_hash DOCKERFILE CONTEXT TARGET ARGS...: what an image is a function of.
inputs_hash() {
  local dockerfile=$1 context=$2; shift 2
  {
    sha256sum < "$dockerfile"
    printf '%s\n' "$@"
    (cd "$context" && find . -path ./.git -prune -o -path './build*' -prune -o -path ./.whl -prune \
       -o -name __pycache__ -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
    local from
    for from in $(grep -E '^FROM ' "$dockerfile" | awk '{print $2}' | sort -u); do
      [ "$from" = scratch ] && continue
      case "$from" in \$*) continue ;; esac
      podman image inspect --format '{{.Id}}' "$from" 2>/dev/null || echo "$from"
    done
  } | sha256sum | cut -c1-32
}

# build NAME DOCKERFILE CONTEXT [podman build args...]: builds unless inputs
# are unchanged. A stamp file records "<inputs hash> <image id>" per name
# (buildah's layer cache can hand back an earlier image with its earlier
# labels, so the hash is not kept as a label).
build() {
  local name=$1 dockerfile=$2 context=$3; shift 3
  local hash; hash=$(inputs_hash "$dockerfile" "$context" "$@" "${EXTRA_INPUTS:-}")
  local stamp; stamp="$cache/stamps/${name//[\/:]/_}"
  local id; id=$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
  if [ -n "$id" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$hash $id" ]; then say "$name: up to date"; return 0; fi
  say "building $name"
  local t0=$SECONDS log="$cache/build-${name//[\/:]/_}.log"
  podman build "${build_flags[@]}" -f "$dockerfile" -t "$name" "$@" "$context" > "$log" 2>&1 \
    || { tail -40 "$log" >&2; die "building $name failed (log: $log)"; }
  mkdir -p "$cache/stamps"
  local new_id; new_id=$(podman image inspect --format '{{.Id}}' "$name")
  echo "$hash $new_id" > "$stamp"
  say "built $name in $((SECONDS - t0))s"
  drop_replaced_podman_image "$id" "$new_id"
}

# drop_replaced_podman_image OLD_ID NEW_ID: a rebuilt image leaves its
# predecessor untagged, and for the PyTorch image that is gigabytes per code
# change; it goes unless something still tags or uses it.
drop_replaced_podman_image() {
  local old=$1 new=$2
  [ -n "$old" ] && [ "$old" != "$new" ] || return 0
  [ "$(podman image inspect --format '{{len .RepoTags}}' "$old" 2>/dev/null)" = 0 ] || return 0
  podman rmi "$old" >/dev/null 2>&1 || true
}

bases() { bash "$root/scripts/base-image.sh" >/dev/null; }

node_images() {
  bases
  local bin; bin=$(bash "$root/scripts/k8s-tools.sh" coredns | tail -1)
  build localhost/khorovod/pause:1 "$root/deploy/docker/node/pause.Dockerfile" "$root/deploy/docker/node"
  local ctx="$cache/ctx-coredns"
  rm -rf "$ctx"; mkdir -p "$ctx"; cp "$bin/coredns" "$ctx/coredns"
  build "localhost/khorovod/coredns:$(cat "$bin/coredns.version")" "$root/deploy/docker/node/coredns.Dockerfile" "$ctx"
}

# The pinned torch (python/torch-pin.txt) and its dependencies for Debian 12's
# CPython, downloaded once by scripts/python-wheels.sh.
torch_wheels() {
  bash "$root/scripts/python-wheels.sh" --download-only | tail -1
}

# The khorovod wheel (`pip wheel .` through scripts/python-wheels.sh, for
# CPython 3.11 as Debian 12 has, CPU only), cached by the hash of the sources
# it is built from (python/ holds the TensorFlow pin). khorovod_wheel
# --tensorflow: the one with the TensorFlow ops, built against the pinned
# TensorFlow.
khorovod_wheel() {
  local flavour=khorovod flags=() given=${KHOROVOD_WHEEL_DIR:-}
  if [ "${1:-}" = --tensorflow ]; then flavour=khorovod-tf flags=(--tensorflow) given=${KHOROVOD_TF_WHEEL_DIR:-}; fi
  if [ -n "$given" ]; then echo "$given"; return; fi
  local hash; hash=$(cd "$root" && git ls-files -co --exclude-standard -- pyproject.toml CMakeLists.txt cmake runtime python \
                     | LC_ALL=C sort | xargs -r sha256sum | sha256sum | cut -c1-16)
  local dir="$HOME/.cache/khorovod/wheels/$flavour-$hash"
  if ! ls "$dir"/khorovod-*.whl >/dev/null 2>&1; then
    say "building the $flavour wheel (scripts/python-wheels.sh ${flags[*]})"
    bash "$root/scripts/python-wheels.sh" "${flags[@]}" "$dir.tmp" >&2 \
      || die "building the $flavour wheel failed"
    rm -rf "$dir"; mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# Images carry no debug info, whatever the build type of the binaries.
strip_debug() { find "$1/prebuilt" -type f \( -path '*/bin/*' -o -name '*.so*' \) -exec strip --strip-debug {} +; }

prebuilt_images() {
  local build_dir=${1:?usage: images.sh prebuilt BUILD_DIR}
  build_dir=$(cd "$build_dir" && pwd)
  local b
  for b in khorovod-operator khorovodrun khorovod-rendezvous khorovod-example-trainer; do
    [ -x "$build_dir/bin/$b" ] || die "$build_dir/bin/$b is missing (build it first)"
  done
  bases
  local ctx="$cache/ctx-operator"
  rm -rf "$ctx"; mkdir -p "$ctx/prebuilt/bin"
  cp "$build_dir/bin/khorovod-operator" "$ctx/prebuilt/bin/"
  strip_debug "$ctx"
  build "$REGISTRY/khorovod-operator:$TAG" "$root/deploy/docker/operator.Dockerfile" "$ctx" --target prebuilt
  ctx="$cache/ctx-runtime"
  rm -rf "$ctx"; mkdir -p "$ctx/prebuilt/bin" "$ctx/prebuilt/lib" "$ctx/deploy/docker"
  cp "$build_dir"/bin/{khorovodrun,khorovod-rendezvous,khorovod-example-trainer} "$ctx/prebuilt/bin/"
  cp -P "$build_dir"/lib/libkhorovod*.so* "$ctx/prebuilt/lib/"
  cp "$root/deploy/docker/slot-entrypoint.sh" "$ctx/deploy/docker/"
  strip_debug "$ctx"
  build "$REGISTRY/khorovod-runtime:$TAG" "$root/deploy/docker/runtime.Dockerfile" "$ctx" --target prebuilt
  [ "${2:-}" = core ] && return 0
  pytorch_image "$REGISTRY/khorovod-runtime:$TAG"
  tensorflow_image "$REGISTRY/khorovod-runtime:$TAG"
}

# prometheus-operator's images, tagged with the versions the binaries were
# built at (scripts/k8s-tools.sh); one scratch image per binary.
monitoring_images() {
  local bin; bin=$(bash "$root/scripts/k8s-tools.sh" prometheus-operator prometheus-config-reloader prometheus | tail -1)
  local ctx="$cache/ctx-monitoring" op_version prom_version
  op_version=$(cat "$bin/prometheus-operator.version"); prom_version=$(cat "$bin/prometheus.release")
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$bin/prometheus-operator" "$bin/prometheus-config-reloader" "$bin/prometheus" "$ctx/"
  local df="$root/deploy/docker/node/prometheus-operator.Dockerfile"
  build "localhost/khorovod/prometheus-operator:$op_version" "$df" "$ctx" --target prometheus-operator
  build "localhost/khorovod/prometheus-config-reloader:$op_version" "$df" "$ctx" --target prometheus-config-reloader
  build "localhost/khorovod/prometheus:$prom_version" "$df" "$ctx" --target prometheus
  echo "localhost/khorovod/prometheus-operator:$op_version localhost/khorovod/prometheus-config-reloader:$op_version" \
       "localhost/khorovod/prometheus:$prom_version"
}

# The PyTorch worker: the runtime image plus python3, torch and khorovod.torch.
pytorch_image() {
  local torch wheel ctx="$cache/ctx-pytorch"
  torch=$(torch_wheels); wheel=$(khorovod_wheel)
  rm -rf "$ctx"; mkdir -p "$ctx/wheel" "$ctx/python"
  cp "$wheel"/khorovod-*.whl "$ctx/wheel/"
  cp "$root/python/torch-pin.txt" "$ctx/python/"
  # FROM ${RUNTIME} is an argument: the runtime image's ID joins the inputs.
  EXTRA_INPUTS="runtime $(podman image inspect --format '{{.Id}}' "$1")" \
  build "$REGISTRY/khorovod-pytorch:$TAG" "$root/deploy/docker/pytorch.Dockerfile" "$ctx" \
    --build-arg "RUNTIME=$1" \
    --volume "$torch:/wheels:ro"
}

# The TensorFlow worker: the runtime image plus python3, tensorflow-cpu,
# tf-keras and khorovod.tensorflow (no torch).
tensorflow_image() {
  local tf wheel ctx="$cache/ctx-tensorflow"
  tf=$(bash "$root/tests/python/tensorflow/run.sh" --download-only | tail -1); wheel=$(khorovod_wheel --tensorflow)
  rm -rf "$ctx"; mkdir -p "$ctx/wheel" "$ctx/python" "$ctx/examples/python"
  cp "$wheel"/khorovod-*.whl "$ctx/wheel/"
  cp "$root/python/tensorflow-pin.txt" "$root/python/tf-keras-pin.txt" "$ctx/python/"
  cp "$root/examples/python/keras_mnist_elastic.py" "$ctx/examples/python/"
  EXTRA_INPUTS="runtime $(podman image inspect --format '{{.Id}}' "$1")" \
  build "$REGISTRY/khorovod-tensorflow:$TAG" "$root/deploy/docker/tensorflow.Dockerfile" "$ctx" \
    --build-arg "RUNTIME=$1" \
    --volume "$tf:/wheels:ro"
}

source_images() {  # [operator|runtime|runtime-cuda|pytorch|tensorflow ...] (default: all)
  REGISTRY=localhost/khorovod-source
  local want=" ${*:-operator runtime runtime-cuda pytorch tensorflow} "
  bases
  [[ $want == *" operator "* ]] && build "$REGISTRY/khorovod-operator:$TAG" "$root/deploy/docker/operator.Dockerfile" "$root"
  [[ $want == *" runtime "* ]] && build "$REGISTRY/khorovod-runtime:$TAG" "$root/deploy/docker/runtime.Dockerfile" "$root"
  if [[ $want == *" runtime-cuda "* ]]; then
    build "$REGISTRY/khorovod-runtime-cuda:$TAG" "$root/deploy/docker/runtime-cuda.Dockerfile" "$root" \
      --volume "$(torch_wheels):/wheels:ro"
  fi
  # The Python workers start from the from-source runtime (REGISTRY names them).
  [[ $want == *" pytorch "* ]] && pytorch_image "$REGISTRY/khorovod-runtime:$TAG"
  [[ $want == *" tensorflow "* ]] && tensorflow_image "$REGISTRY/khorovod-runtime:$TAG"
  return 0
}

# podman save writes the whole archive to a temporary file first (7 GB for
# the PyTorch image). It goes to a directory of our own, emptied before and
# after every save: a save that was killed or ran out of space used to leave
# its file in /var/tmp, and two such files once filled the disk of a later run.
save_tmp=${KHOROVOD_IMAGE_SAVE_TMP:-/var/tmp/khorovod-image-save}

# free_bytes DIR: the space left on DIR's filesystem.
free_bytes() { df --output=avail -B1 "$1" | tail -1 | tr -d ' '; }

# load NAME...: podman save | ctr import, skipped when containerd already
# holds the image podman has under that name (same image ID, kept as a label).
load() {
  ctr --address "$SOCK" version >/dev/null 2>&1 || die "the node's containerd is not running ($SOCK); run scripts/real-node.sh up"
  local name id have size free target labels labelled
  rm -rf "$save_tmp"; mkdir -p "$save_tmp"
  trap 'rm -rf "$save_tmp"' EXIT
  for name in "$@"; do
    id=$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null) || die "no image $name (build it first)"
    # Loaded already: the label names this image and the record still points
    # where it pointed when labelled (a store shared by several checkouts may
    # have had another image imported under the name since: ctr keeps the
    # labels of a record whose target an import replaces).
    read -r target labels < <(ctr --address "$SOCK" -n k8s.io images ls "name==$name" 2>/dev/null |
                                awk 'NR>1 {print $3, $NF}') || true
    have=$(tr ',' '\n' <<<"${labels:-}" | sed -n 's/^dev.khorovod.id=//p')
    labelled=$(tr ',' '\n' <<<"${labels:-}" | sed -n 's/^dev.khorovod.target=//p')
    [ "$have" = "$id" ] && [ -n "${target:-}" ] && [ "$labelled" = "$target" ] && continue
    size=$(podman image inspect --format '{{.Size}}' "$name")
    free=$(free_bytes "$save_tmp")
    # The archive, and room for containerd to store what it does not hold yet.
    [ "$free" -gt $((size + (1 << 30))) ] ||
      die "loading $name needs about $((size >> 30)) GiB free on $save_tmp's filesystem for podman's archive, and $((free >> 30)) GiB are free"
    say "loading $name into containerd"
    local full="$name"   # containerd names images in full, as the kubelet asks for them
    case "$name" in localhost/*|*.*/*) ;; *) full="docker.io/library/$name" ;; esac
    # An import over an existing name only updates the record, which does not
    # wake containerd's garbage collector: the replaced image's blobs and
    # snapshots (15 GB for the PyTorch image) stayed on disk after every code
    # change. Removing it first, synchronously, frees them (snapshots that a
    # running container still uses stay until it ends).
    if [ -n "$(ctr --address "$SOCK" -n k8s.io images ls -q "name==$full" 2>/dev/null)" ]; then
      ctr --address "$SOCK" -n k8s.io images rm --sync "$full" >/dev/null 2>&1 || true
    fi
    TMPDIR=$save_tmp podman save --format docker-archive "$name" \
      | ctr --address "$SOCK" -n k8s.io images import - >/dev/null \
      || die "importing $name into containerd failed ($(free_bytes "$save_tmp") bytes free on $save_tmp)"
    rm -rf "${save_tmp:?}"/*
    target=$(ctr --address "$SOCK" -n k8s.io images ls "name==$full" 2>/dev/null | awk 'NR>1 {print $3}')
    ctr --address "$SOCK" -n k8s.io images label "$full" "dev.khorovod.id=$id" "dev.khorovod.target=$target" >/dev/null
  done
}

case "${1:-}" in
  node) node_images ;;
  prebuilt) shift; prebuilt_images "$@" ;;
  prebuilt-core) shift; prebuilt_images "${1:?usage: images.sh prebuilt-core BUILD_DIR}" core ;;
  monitoring) monitoring_images ;;
  source) shift; source_images "$@" ;;
  load) shift; load "$@" ;;
  *) echo "usage: images.sh node|prebuilt BUILD_DIR|prebuilt-core BUILD_DIR|monitoring|source|load NAME..." >&2; exit 2 ;;
esac
