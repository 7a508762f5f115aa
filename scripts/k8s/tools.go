//go:build tools

// Package tools pins the cluster tools khorovod's tests run against, in one
// module graph: the Kubernetes binaries, etcd, Helm, CoreDNS, Kueue,
// scheduler-plugins' scheduler and prometheus-operator. One graph means one
// version of client-go and friends, so a package that several tools import is
// compiled once (scripts/k8s-tools.sh, which also builds kwok and Prometheus,
// whose releases need other client-go versions). Nothing here is compiled
// into khorovod itself.
package tools

import (
	_ "github.com/coredns/coredns"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader"
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kueue/cmd/kueue"
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
