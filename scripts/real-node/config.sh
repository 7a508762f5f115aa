#!/usr/bin/env bash
# Configuration files of a node's components (sourced by scripts/real-node.sh
# and scripts/real-cluster.sh, which set RUN, DIR, NODE, NODE_IP, POD_SUBNET,
# POD_GW, POD_CIDR, SVC_CIDR, DNS_IP, SOCK, PAUSE_IMAGE; a cluster's node
# also sets CGROUP_ROOT, CNI_BRIDGE and NODE_ROUTE, which default to the
# single real node's).

# containerd: its own root (images persist between runs), state and socket,
# so it never meets a containerd the machine may already run. runc with the
# cgroupfs driver (no systemd here). restrict_oom_score_adj because the
# kernel withholds CAP_SYS_RESOURCE: no container's oom_score_adj may go
# below containerd's own.
write_containerd_config() {
  mkdir -p "$RUN/cni/net.d"
  cat > "$RUN/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd"
state = "$RUN/containerd-state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
EOF
  # The pod network: one bridge in the node's network namespace, host-local
  # addresses, and routes for the cluster's own ranges only -- no default
  # route and no masquerade, so a pod has no path off this machine.
  cat > "$RUN/cni/net.d/10-khorovod.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "khorovod-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "${CNI_BRIDGE:-khv-cni0}", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$RUN/cni/ipam",
        "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$POD_GW"}]],
        "routes": [{"dst": "$POD_CIDR"}, {"dst": "$SVC_CIDR"}, {"dst": "${NODE_ROUTE:-$NODE_IP/32}"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# kubelet: client certificate for the API, webhook authn/authz for its own
# API, cgroupfs under its own cgroup root (so teardown removes exactly its
# cgroups), no swap check, cluster DNS at DNS_IP. This machine's cgroups are
# v1 (hybrid): kubelets from 1.35 on refuse to start there unless
# failCgroupV1 is false (the field exists since 1.31; 1.34's default).
write_kubelet_config() {
  cat > "$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
tlsCertFile: $RUN/pki/kubelet-serving.crt
tlsPrivateKeyFile: $RUN/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
cgroupRoot: /${CGROUP_ROOT:-khorovod-node}
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: ""
rotateCertificates: false
serverTLSBootstrap: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
syncFrequency: 10s
fileCheckFrequency: 20s
maxPods: 64
serializeImagePulls: false
featureGates: {ResourceHealthStatus: true}
EOF
}

# kube-proxy: iptables mode inside the node's namespace; it touches no
# machine-wide conntrack sysctl and keeps its oom_score_adj.
write_kube_proxy_config() {
  cat > "$RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN/kube-proxy.kubeconfig}
hostnameOverride: $NODE
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:10256
oomScoreAdj: 0
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {syncPeriod: 10s, minSyncPeriod: 1s}
EOF
}
