#!/usr/bin/env bash
# Builds the cluster tools the tests run against, from Go modules with this
# machine's Go toolchain, and caches them outside the clone. Every tool comes
# from ONE module graph (scripts/k8s/go.mod), so client-go, apimachinery and
# the rest are one version for all of them and each shared package compiles
# once:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet,
#     kube-proxy (k8s.io/kubernetes, staging modules replaced by their
#     published v0.x releases), etcd, helm, coredns;
#   kueue (Kueue's manager) and coscheduler (scheduler-plugins' scheduler),
#     with the CRDs they ship copied under manifests/ (tests/ecosystem);
#   prometheus-operator and prometheus-config-reloader, with the operator's
#     CRDs and RBAC examples under manifests/prometheus-operator/;
#   khorovod-device-plugin, the project's own simulated-GPU device plugin
#     (scripts/k8s/cmd/khorovod-device-plugin, on k8s.io/kubelet's
#     deviceplugin/v1beta1 API); rebuilt when its source changes (a stamp of
#     its source's hash beside it), without changing the other tools' key.
# The missing binaries are built by one `go build` per version stamp, so the
# compiler's parallelism spans every tool. Two tools build in graphs of their
# own, at pinned versions, because their releases do not compile against this
# graph's Kubernetes v0.34 libraries: kwok (a constant v0.34 removed) and
# Prometheus (a client-go signature v0.34 changed), the latter with
# kubernetes_sd as its only service discovery (its cloud SDKs are most of its
# build, and its module has no build tags for them). The cache directory is keyed by a
# hash of the module files and the Go version: a change there builds anew.
# Prints the cache's bin directory on its last line.
# Usage: scripts/k8s-tools.sh [binary...]   (default: all of them)
#
# KHOROVOD_K8S_VERSION picks the Kubernetes minor the cluster's own binaries
# are (docs/install.md, "Kubernetes versions"): unset or 1.34, the
# default graph; 1.37, the graph in scripts/k8s-1.37 builds kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy into a
# directory of its own (keyed the same way), whose every other tool is a link
# to the default graph's (kubectl, etcd, Helm, ... are not tied to the
# server's minor).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${KHOROVOD_K8S_CACHE:-$HOME/.cache/khorovod/k8s}
command -v go >/dev/null || { echo "k8s-tools: the Go toolchain is required (go not on PATH)" >&2; exit 1; }
export GOFLAGS="-mod=mod -trimpath" CGO_ENABLED=0 GOTOOLCHAIN=local
case "${KHOROVOD_K8S_VERSION:-1.34}" in
  1.34) ;;
  1.37) exec bash "$root/scripts/k8s-tools-minor.sh" 1.37 "$@" ;;
  *) echo "k8s-tools: KHOROVOD_K8S_VERSION=$KHOROVOD_K8S_VERSION is not supported (1.34 or 1.37)" >&2; exit 2 ;;
esac
mod="$root/scripts/k8s"
# BUILD_REV changes when the way the binaries are built changes.
BUILD_REV=3
KWOK_VERSION=v0.7.0
PROMETHEUS_VERSION=v0.305.1   # Prometheus 3.5.1 (LTS), the newest prometheus-operator v0.85 is tested with
key=$( (cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; echo "$BUILD_REV $KWOK_VERSION $PROMETHEUS_VERSION"; go env GOVERSION) |
       sha256sum | cut -c1-12)
bin="$cache/tools-$key/bin"
mkdir -p "$bin"

all=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy helm kwok coredns
     kueue coscheduler prometheus-operator prometheus-config-reloader prometheus khorovod-device-plugin)
wanted=("$@"); [ ${#wanted[@]} -gt 0 ] || wanted=("${all[@]}")

package_of() {  # binary -> main package in the module graph
  case "$1" in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    kube-*|kubectl|kubelet) echo "k8s.io/kubernetes/cmd/$1" ;;
    helm) echo helm.sh/helm/v3/cmd/helm ;;
    kwok) echo "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" ;;
    coredns) echo github.com/coredns/coredns ;;
    kueue) echo sigs.k8s.io/kueue/cmd/kueue ;;
    coscheduler) echo sigs.k8s.io/scheduler-plugins/cmd/scheduler ;;
    prometheus-operator) echo github.com/prometheus-operator/prometheus-operator/cmd/operator ;;
    prometheus-config-reloader) echo github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader ;;
    prometheus) echo ./cmd/prometheus ;;
    khorovod-device-plugin) echo ./cmd/khorovod-device-plugin ;;
    *) echo "k8s-tools: unknown binary $1" >&2; return 2 ;;
  esac
}
# The build stamp a binary reports: the ldflags differ between groups, so each
# group is one `go build`.
group_of() {
  case "$1" in
    prometheus-operator|prometheus-config-reloader) echo prometheus-operator ;;
    prometheus) echo prometheus ;;
    kwok) echo kwok ;;
    *) echo k8s ;;
  esac
}
module_version() { (cd "$mod" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1"); }
module_dir() { (cd "$mod" && go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}' "$1"); }

# Prometheus builds as its own main module from a copy whose plugins.go
# registers kubernetes_sd alone (outside the clone, beside the binaries).
prometheus_src="$cache/src/prometheus-$PROMETHEUS_VERSION"
prepare_prometheus_copy() {
  local src tmp
  [ -f "$prometheus_src/.complete" ] && return 0
  tmp=$(mktemp -d)
  src=$(cd "$tmp" && go mod download -json "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" |
        sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  rm -rf "$tmp"
  [ -n "$src" ] || { echo "k8s-tools: could not download Prometheus $PROMETHEUS_VERSION" >&2; return 1; }
  rm -rf "$prometheus_src"; mkdir -p "$(dirname "$prometheus_src")"
  cp -r "$src" "$prometheus_src"; chmod -R u+w "$prometheus_src"
  printf 'package plugins\n\nimport _ "github.com/prometheus/prometheus/discovery/kubernetes"\n' \
    > "$prometheus_src/plugins/plugins.go"
  touch "$prometheus_src/.complete"
}
prometheus_release() {  # the module's version v0.3XX.Y is Prometheus v3.XX.Y
  local v=${PROMETHEUS_VERSION#v0.}; echo "v3.$((10#${v:1:2})).${v#*.}"
}

ldflags_of() {  # group
  local v
  case "$1" in
    k8s)  # the version the release builds carry (Helm's kubeVersion checks and kubectl's skew read it)
      v=$(module_version k8s.io/kubernetes); local minor=${v#v1.}; minor=${minor%%.*}
      echo "-X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1" \
           "-X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
           "-X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1" \
           "-X k8s.io/client-go/pkg/version.gitMinor=$minor" ;;
    prometheus-operator)
      v=$(module_version github.com/prometheus-operator/prometheus-operator)
      echo "-X github.com/prometheus/common/version.Version=${v#v} -X github.com/prometheus/common/version.Branch=HEAD" ;;
    prometheus)
      v=$(prometheus_release)
      echo "-X github.com/prometheus/common/version.Version=${v#v} -X github.com/prometheus/common/version.Branch=HEAD" ;;
  esac
}

# What a test reads beside the binaries: versions and the CRDs/RBAC the tools ship.
write_sidecars() {
  local d
  module_version github.com/coredns/coredns > "$bin/coredns.version"
  module_version github.com/prometheus-operator/prometheus-operator > "$bin/prometheus-operator.version"
  prometheus_release > "$bin/prometheus.release"
  rm -rf "$bin/manifests"; mkdir -p "$bin/manifests/kueue" "$bin/manifests/coscheduler" "$bin/manifests/prometheus-operator"
  d=$(module_dir sigs.k8s.io/kueue); cp -r "$d/config/components/crd/bases" "$bin/manifests/kueue/"
  d=$(module_dir sigs.k8s.io/scheduler-plugins)
  cp "$d/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$bin/manifests/coscheduler/"
  d=$(module_dir github.com/prometheus-operator/prometheus-operator)
  cp -r "$d/example/prometheus-operator-crd" "$d/example/rbac/prometheus-operator" "$d/example/rbac/prometheus" \
        "$bin/manifests/prometheus-operator/"
  chmod -R u+w "$bin/manifests"
}

# The device plugin is this project's source: its binary is current only while
# the stamp beside it names its source's hash.
plugin_src_hash() { cat "$mod"/cmd/khorovod-device-plugin/*.go | sha256sum | cut -c1-12; }
current() {  # binary
  [ -x "$bin/$1" ] || return 1
  [ "$1" != khorovod-device-plugin ] || [ "$(cat "$bin/$1.src" 2>/dev/null)" = "$(plugin_src_hash)" ]
}
missing=()
for b in "${wanted[@]}"; do package_of "$b" >/dev/null || exit 2; current "$b" || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
  for group in k8s prometheus-operator prometheus kwok; do
    pkgs=(); names=()
    for b in "${missing[@]}"; do
      [ "$(group_of "$b")" = "$group" ] || continue
      pkgs+=("$(package_of "$b")"); names+=("$b")
    done
    [ ${#pkgs[@]} -gt 0 ] || continue
    echo "k8s-tools: building ${names[*]}" >&2
    out=$(mktemp -d "$bin/.build.XXXXXX")
    if [ "$group" = kwok ]; then
      GOBIN="$out" GOFLAGS=-trimpath go install -ldflags="-s -w" "${pkgs[@]}" || { rm -rf "$out"; exit 1; }
    elif [ "$group" = prometheus ]; then
      prepare_prometheus_copy
      (cd "$prometheus_src" && go build -ldflags="-s -w $(ldflags_of prometheus)" -o "$out/" "${pkgs[@]}") ||
        { rm -rf "$out"; exit 1; }
    else
      (cd "$mod" && go build -ldflags="-s -w $(ldflags_of "$group")" -o "$out/" "${pkgs[@]}") || { rm -rf "$out"; exit 1; }
    fi
    # Go names a binary after its package path's last element (before a /vN).
    for b in "${names[@]}"; do
      p=$(package_of "$b"); p=${p%@*}; [[ $p =~ /v[0-9]+$ ]] && p=${p%/*}
      mv "$out/${p##*/}" "$bin/$b"
      [ "$b" != khorovod-device-plugin ] || plugin_src_hash > "$bin/$b.src"
    done
    rm -rf "$out"
  done
fi
[ -f "$bin/manifests/.done" ] || { write_sidecars && touch "$bin/manifests/.done"; }
echo "$bin"
