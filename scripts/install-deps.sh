#!/usr/bin/env bash
# Installs every system dependency khorovod needs, from Debian packages only.
# Idempotent: packages already present are skipped, so repeated runs are cheap.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache clang-format
  shellcheck  # the lint stage's script gate (tests/lint/run.sh)
  libgloo-dev libcpp-httplib-dev nlohmann-json3-dev libyaml-cpp-dev
  prometheus-cpp-dev  # the Prometheus C++ client (runtime/metrics, docs/observability.md)
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libssl-dev openssl curl
  prometheus python3
  # The Python package (python/): bindings, and PyTorch for Debian's
  # /usr/bin/python3 (the interpreter CMake builds and tests it for).
  python3-dev pybind11-dev python3-torch python3-numpy python3-pytest
  python3-pip  # scripts/install-cuda.sh fetches the CUDA/NCCL wheels with pip download
  python3-venv  # tests/python/pip_install.sh: clean venvs for pip install .
  # The real node (scripts/real-node.sh) and its images (scripts/images.sh).
  containerd runc containernetworking-plugins iptables conntrack socat iproute2 util-linux
  podman buildah debootstrap
  # khorovodrun's remote hosts (tests/runtime/launcher/khorovodrun_ssh_test.sh:
  # a real sshd in each simulated host's network namespace).
  openssh-server openssh-client
)

# Node.js and npm: the dashboard's type check against Grafana's schema
# (tests/metrics/grafana_schema_check.sh). A machine whose Node.js comes
# from elsewhere with its own npm keeps it.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
