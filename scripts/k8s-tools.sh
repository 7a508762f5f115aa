#!/usr/bin/env bash
# Builds the Kubernetes binaries the operator tests run against, from Go
# modules with this machine's Go toolchain, and caches them outside the clone:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd
#     from scripts/k8s/go.mod (k8s.io/kubernetes with each staging module
#     replaced by its published v0.x release);
#     and, for the real node (scripts/real-node.sh), kubelet and kube-proxy;
#   helm, kwok and CoreDNS with `go install <module>@<version>`;
#   and, for the ecosystem stage (tests/ecosystem/, opt-in), Kueue's manager
#   and scheduler-plugins' scheduler (coscheduling) from their own modules at
#   a pinned version (their go.mod/go.sum, replace directives included), with
#   the CRDs they ship copied beside them under manifests/;
#   and, for the prometheus-operator test (tests/realnode/prometheus_operator.sh,
#   opt-in), prometheus-operator and prometheus-config-reloader from the
#   prometheus-operator module (its CRDs and RBAC examples under
#   manifests/prometheus-operator/) and prometheus from its module with
#   kubernetes_sd as its only service discovery (plugins.go rewritten to
#   register that plugin alone: v3.5's module has no build tags for it), all
#   at pinned versions.
# Prints the cache's bin directory on its last line. Idempotent: a binary
# already in the cache for its version is not rebuilt.
# Usage: scripts/k8s-tools.sh [binary...]   (default: all of them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=v1.34.4
ETCD_VERSION=v3.6.4
HELM_VERSION=v3.19.0
KWOK_VERSION=v0.7.0
COREDNS_VERSION=v1.12.4
KUEUE_VERSION=v0.14.0
SCHEDULER_PLUGINS_VERSION=v0.33.5   # built on k8s 1.33; the scheduler API it uses is served by 1.34
PROMETHEUS_OPERATOR_VERSION=v0.85.0   # the newest release of the main module on the Go module proxy
PROMETHEUS_VERSION=v0.305.1           # Prometheus 3.5.1 (LTS), the newest the operator v0.85 is tested with
cache=${KHOROVOD_K8S_CACHE:-$HOME/.cache/khorovod/k8s}
# BUILD_REV changes when the way the binaries are built changes.
BUILD_REV=2
bin="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-helm-$HELM_VERSION-kwok-$KWOK_VERSION-r$BUILD_REV/bin"
mkdir -p "$bin"
command -v go >/dev/null || { echo "k8s-tools: the Go toolchain is required (go not on PATH)" >&2; exit 1; }
export GOFLAGS="${GOFLAGS:-} -trimpath" CGO_ENABLED=0 GOTOOLCHAIN=local

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl helm kwok
                                  kubelet kube-proxy coredns)

# Stamp the version the release builds carry, so the API server reports
# v1.34.4 (Helm's kubeVersion checks and kubectl version skew read it).
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
version_flags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
build_from_wrapper() {  # name package
  (cd "$root/scripts/k8s" && go build -ldflags="-s -w $version_flags" -o "$bin/$1.tmp" "$2") && mv "$bin/$1.tmp" "$bin/$1"
}
# Ecosystem builds are opt-in and big: low priority, two compile jobs.
build_from_module() {  # name module@version package-dir manifests-subdir...
  local name=$1 modver=$2 pkg=$3; shift 3
  local src tmp; src=$(GOFLAGS=-mod=mod go mod download -json "$modver" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$src" ] || { echo "k8s-tools: could not download $modver" >&2; return 1; }
  tmp=$(mktemp -d); cp -r "$src/." "$tmp/"; chmod -R u+w "$tmp"
  [ -z "${PREPARE:-}" ] || (cd "$tmp" && $PREPARE) || { rm -rf "$tmp"; return 1; }
  (cd "$tmp" && GOMAXPROCS=2 nice -n 15 go build -p 2 -ldflags="-s -w ${LDFLAGS_EXTRA:-}" -o "$bin/$name.tmp" "./$pkg") \
    || { rm -rf "$tmp"; return 1; }
  rm -rf "$bin/manifests/$name"; mkdir -p "$bin/manifests/$name"
  local m; for m in "$@"; do cp -r "$tmp/$m" "$bin/manifests/$name/"; done
  rm -rf "$tmp"; mv "$bin/$name.tmp" "$bin/$name"
}
# Prometheus with kubernetes_sd only: the other service discoveries (cloud
# SDKs) are most of its build. plugins/plugins.go is what registers them.
prometheus_k8s_sd_only() {
  printf 'package plugins\n\nimport _ "github.com/prometheus/prometheus/discovery/kubernetes"\n' > plugins/plugins.go
}
# The operator's go.mod replaces its API and client modules with ./pkg/...,
# which its module zip leaves out (they are modules of their own): put the
# published ones, at the same version, where the replace points.
prometheus_operator_submodules() {
  local m src
  for m in pkg/apis/monitoring pkg/client; do
    src=$(GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator/$m@$PROMETHEUS_OPERATOR_VERSION" \
          | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -n "$src" ] || return 1
    mkdir -p "$m"; cp -r "$src/." "$m/"; chmod -R u+w "$m"
  done
}
common_version() {  # the version prometheus/common's build info reports
  echo "-X github.com/prometheus/common/version.Version=${1#v} -X github.com/prometheus/common/version.Branch=HEAD"
}
install_module() {  # name module@version
  local tmp; tmp=$(mktemp -d)
  GOBIN="$tmp" go install -ldflags="-s -w" "$2" && mv "$tmp/$1" "$bin/$1"; rm -rf "$tmp"
}

for b in "${wanted[@]}"; do
  # CoreDNS's version is not in the directory name: a stamp beside it says which it is.
  if [ "$b" = coredns ]; then [ "$(cat "$bin/coredns.version" 2>/dev/null)" = "$COREDNS_VERSION" ] && continue
  elif [ "$b" = kueue ]; then [ "$(cat "$bin/kueue.version" 2>/dev/null)" = "$KUEUE_VERSION" ] && continue
  elif [ "$b" = coscheduler ]; then
    [ "$(cat "$bin/coscheduler.version" 2>/dev/null)" = "$SCHEDULER_PLUGINS_VERSION" ] && continue
  elif [ "$b" = prometheus-operator ] || [ "$b" = prometheus-config-reloader ]; then
    [ "$(cat "$bin/$b.version" 2>/dev/null)" = "$PROMETHEUS_OPERATOR_VERSION" ] && continue
  elif [ "$b" = prometheus ]; then [ "$(cat "$bin/prometheus.version" 2>/dev/null)" = "$PROMETHEUS_VERSION" ] && continue
  elif [ -x "$bin/$b" ]; then continue; fi
  echo "k8s-tools: building $b" >&2
  case "$b" in
    etcd) build_from_wrapper etcd go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy)
      build_from_wrapper "$b" "k8s.io/kubernetes/cmd/$b" ;;
    helm) install_module helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" ;;
    kwok) install_module kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" ;;
    coredns) install_module coredns "github.com/coredns/coredns@$COREDNS_VERSION"
             echo "$COREDNS_VERSION" > "$bin/coredns.version" ;;
    kueue) build_from_module kueue "sigs.k8s.io/kueue@$KUEUE_VERSION" cmd/kueue config/components/crd/bases
           echo "$KUEUE_VERSION" > "$bin/kueue.version" ;;
    coscheduler) build_from_module coscheduler "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" cmd/scheduler \
                   config/crd/bases/scheduling.x-k8s.io_podgroups.yaml
                 echo "$SCHEDULER_PLUGINS_VERSION" > "$bin/coscheduler.version" ;;
    prometheus-operator)
      PREPARE=prometheus_operator_submodules LDFLAGS_EXTRA=$(common_version "$PROMETHEUS_OPERATOR_VERSION") \
        build_from_module prometheus-operator \
        "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" cmd/operator \
        example/prometheus-operator-crd example/rbac/prometheus-operator example/rbac/prometheus
      echo "$PROMETHEUS_OPERATOR_VERSION" > "$bin/prometheus-operator.version" ;;
    prometheus-config-reloader)
      PREPARE=prometheus_operator_submodules LDFLAGS_EXTRA=$(common_version "$PROMETHEUS_OPERATOR_VERSION") \
        build_from_module prometheus-config-reloader \
        "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" cmd/prometheus-config-reloader
      echo "$PROMETHEUS_OPERATOR_VERSION" > "$bin/prometheus-config-reloader.version" ;;
    prometheus)
      # The module's version v0.3XX.Y is Prometheus v3.XX.Y.
      v=${PROMETHEUS_VERSION#v0.}; v="3.$((10#${v:1:2})).${v#*.}"
      PREPARE=prometheus_k8s_sd_only LDFLAGS_EXTRA=$(common_version "$v") build_from_module prometheus \
        "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" cmd/prometheus
      echo "$PROMETHEUS_VERSION" > "$bin/prometheus.version"; echo "v$v" > "$bin/prometheus.release" ;;
    *) echo "k8s-tools: unknown binary $b" >&2; exit 2 ;;
  esac
done
echo "$bin"
