#!/usr/bin/env bash
# Certificates and kubeconfigs of the real node (sourced by scripts/real-node.sh):
# one CA, the API server's serving certificate (valid for the Service address
# pods reach it by and for the node address), a client certificate per
# component, the kubelet's serving certificate and the service-account keys.
# make_pki DIR API_URL NODE_NAME NODE_IP SERVICE_IP: writes DIR/pki and DIR/*.kubeconfig.
make_pki() {
  local dir=$1 url=$2 node=$3 node_ip=$4 svc_ip=$5
  local pki="$dir/pki"
  mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=khorovod-node-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  issue() {  # name subject ext
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
    printf '%s\n' "$3" > "$pki/$1.ext"
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
      -days 7 -out "$pki/$1.crt" -extfile "$pki/$1.ext" 2>/dev/null
  }
  local client='extendedKeyUsage=clientAuth'
  issue apiserver "/CN=kube-apiserver" "subjectAltName=IP:$svc_ip,IP:$node_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost
extendedKeyUsage=serverAuth"
  issue kubelet-serving "/CN=$node" "subjectAltName=IP:$node_ip,DNS:$node
extendedKeyUsage=serverAuth"
  issue admin "/O=system:masters/CN=khorovod-node-admin" "$client"
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  issue controller-manager "/CN=system:kube-controller-manager" "$client"
  issue scheduler "/CN=system:kube-scheduler" "$client"
  issue kubelet "/O=system:nodes/CN=system:node:$node" "$client"
  issue kube-proxy "/CN=system:kube-proxy" "$client"
  issue prometheus "/CN=khorovod-node:prometheus" "$client"
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  local user
  for user in admin controller-manager scheduler kubelet kube-proxy prometheus; do
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
  done
  unset -f issue
}
