#!/usr/bin/env bash
# Builds the Kubernetes binaries of a second supported minor (today 1.37, the
# newest the Go module proxy serves) from the module graph scripts/k8s-<minor>,
# for the apiserver tests and the multi-node stage to run against
# (KHOROVOD_K8S_VERSION, read by scripts/k8s-tools.sh, which execs this).
# Only the server side is tied to the minor: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy build here,
# in one `go build`; every other tool the caller asks for (etcd, kubectl,
# Helm, ...) comes from the default graph and is linked into this directory,
# so a caller finds all of them beside each other as before. The directory is
# keyed by the minor, a hash of the graph's module files and the Go version.
# Prints the bin directory on its last line.
# Usage: scripts/k8s-tools-minor.sh MINOR [binary...]   (default: all of them)
#        scripts/k8s-tools-minor.sh MINOR --check BINARY...   exit 0 if this
#          minor's BINARYs are built (nothing is built; for a cold/warm verdict)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minor=${1:?usage: k8s-tools-minor.sh MINOR [--check] [binary...]}; shift
check=0; [ "${1:-}" = --check ] && { check=1; shift; }
mod="$root/scripts/k8s-$minor"
[ -f "$mod/go.mod" ] || { echo "k8s-tools: no module graph for Kubernetes $minor ($mod)" >&2; exit 2; }
cache=${KHOROVOD_K8S_CACHE:-$HOME/.cache/khorovod/k8s}
export GOFLAGS="-mod=mod -trimpath" CGO_ENABLED=0 GOTOOLCHAIN=local
BUILD_REV=1
key=$( (cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; echo "$BUILD_REV"; go env GOVERSION) | sha256sum | cut -c1-12)
bin="$cache/tools-$minor-$key/bin"
if [ $check = 1 ]; then
  for b in "$@"; do [ -x "$bin/$b" ] || exit 1; done
  exit 0
fi
mkdir -p "$bin"

own=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
is_own() { local o; for o in "${own[@]}"; do [ "$o" = "$1" ] && return 0; done; return 1; }
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
                                   helm kwok coredns kueue coscheduler prometheus-operator prometheus-config-reloader
                                   prometheus khorovod-device-plugin)
others=(); missing=()
for b in "${wanted[@]}"; do
  if is_own "$b"; then [ -x "$bin/$b" ] || missing+=("$b"); else others+=("$b"); fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "k8s-tools: building ${missing[*]} (Kubernetes $minor)" >&2
  v=$(cd "$mod" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' k8s.io/kubernetes)
  m=${v#v1.}; m=${m%%.*}
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1
    -X k8s.io/component-base/version.gitMinor=$m -X k8s.io/component-base/version.gitTreeState=clean
    -X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1
    -X k8s.io/client-go/pkg/version.gitMinor=$m"
  pkgs=(); for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  out=$(mktemp -d "$bin/.build.XXXXXX")
  (cd "$mod" && go build -ldflags="$ldflags" -o "$out/" "${pkgs[@]}") || { rm -rf "$out"; exit 1; }
  for b in "${missing[@]}"; do mv "$out/$b" "$bin/$b"; done
  rm -rf "$out"
fi

# Everything else, from the default graph, linked in by name (with the
# versions and manifests that sit beside those binaries).
if [ ${#others[@]} -gt 0 ]; then
  base=$(KHOROVOD_K8S_VERSION=1.34 bash "$root/scripts/k8s-tools.sh" "${others[@]}" | tail -1)
  [ -d "$base" ] || { echo "k8s-tools: the default graph's tools are missing" >&2; exit 1; }
  for f in "$base"/*; do
    n=${f##*/}; is_own "$n" && continue
    [ -e "$bin/$n" ] && [ ! -L "$bin/$n" ] && continue
    ln -sfn "$f" "$bin/$n"
  done
fi
echo "$bin"
