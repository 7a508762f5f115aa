//go:build tools

// Package tools pins the Kubernetes binaries of the second supported version
// (the newest release the Go module proxy serves), in a module graph of their
// own: the control plane and the node agents. scripts/k8s-tools.sh builds them
// when KHOROVOD_K8S_VERSION names this version and takes every other tool
// (etcd, kubectl, Helm, CoreDNS, ...) from the default graph in ../k8s.
// Nothing here is compiled into khorovod itself.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
