#!/usr/bin/env bash
# Certificates and kubeconfigs of the real node and of the multi-node cluster
# (sourced by scripts/real-node.sh and scripts/real-cluster.sh): one CA, the
# API server's serving certificate (valid for the Service address pods reach
# it by and for the API server's address), a client certificate per
# component, each kubelet's serving and client certificates and the
# service-account keys.
# make_pki DIR API_URL NODE_NAME NODE_IP SERVICE_IP: the cluster's and one
#   node's, into DIR/pki and DIR/*.kubeconfig (the single real node).
# make_cluster_pki DIR API_URL API_IP SERVICE_IP: everything but a kubelet's.
# make_node_pki CA_DIR OUT_DIR API_URL NODE_NAME NODE_IP: a kubelet's, signed
#   by CA_DIR/pki/ca.*, into OUT_DIR/pki (with ca.crt) and OUT_DIR/kubelet.kubeconfig.

# pki_issue PKI NAME SUBJECT EXT: a key and a certificate signed by PKI/ca.
pki_issue() {
  local pki=$1
  openssl req -newkey rsa:2048 -nodes -subj "$3" -keyout "$pki/$2.key" -out "$pki/$2.csr" 2>/dev/null
  printf '%s\n' "$4" > "$pki/$2.ext"
  openssl x509 -req -in "$pki/$2.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 7 -out "$pki/$2.crt" -extfile "$pki/$2.ext" 2>/dev/null
}

# write_kubeconfig DIR PKI URL USER: DIR/USER.kubeconfig with PKI/USER.{crt,key}.
write_kubeconfig() {
  local dir=$1 pki=$2 url=$3 user=$4
  cat > "$dir/$user.kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: khorovod-node
  cluster: {server: "$url", certificate-authority: "$pki/ca.crt"}
users:
- name: $user
  user: {client-certificate: "$pki/$user.crt", client-key: "$pki/$user.key"}
contexts:
- name: khorovod-node
  context: {cluster: khorovod-node, user: $user, namespace: default}
current-context: khorovod-node
KCFG
}

make_cluster_pki() {
  local dir=$1 url=$2 api_ip=$3 svc_ip=$4
  local pki="$dir/pki"
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=khorovod-node-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  local client='extendedKeyUsage=clientAuth'
  pki_issue "$pki" apiserver "/CN=kube-apiserver" "subjectAltName=IP:$svc_ip,IP:$api_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost
extendedKeyUsage=serverAuth"
  pki_issue "$pki" admin "/O=system:masters/CN=khorovod-node-admin" "$client"
  pki_issue "$pki" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  pki_issue "$pki" controller-manager "/CN=system:kube-controller-manager" "$client"
  pki_issue "$pki" scheduler "/CN=system:kube-scheduler" "$client"
  pki_issue "$pki" kube-proxy "/CN=system:kube-proxy" "$client"
  pki_issue "$pki" prometheus "/CN=khorovod-node:prometheus" "$client"
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  local user
  for user in admin controller-manager scheduler kube-proxy prometheus; do write_kubeconfig "$dir" "$pki" "$url" "$user"; done
}

make_node_pki() {
  local ca_dir=$1 dir=$2 url=$3 node=$4 node_ip=$5
  local pki="$dir/pki"
  mkdir -p "$pki"
  [ "$ca_dir/pki" -ef "$pki" ] || cp "$ca_dir/pki/ca.crt" "$ca_dir/pki/ca.key" "$pki/"
  pki_issue "$pki" kubelet-serving "/CN=$node" "subjectAltName=IP:$node_ip,DNS:$node
extendedKeyUsage=serverAuth"
  pki_issue "$pki" kubelet "/O=system:nodes/CN=system:node:$node" 'extendedKeyUsage=clientAuth'
  [ "$ca_dir/pki" -ef "$pki" ] || rm -f "$pki/ca.key"
  write_kubeconfig "$dir" "$pki" "$url" kubelet
}

make_pki() {
  make_cluster_pki "$1" "$2" "$4" "$5"
  make_node_pki "$1" "$1" "$2" "$3" "$4"
}
