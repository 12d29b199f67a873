# PKI and kubeconfigs for the local cluster, made with openssl.
# shellcheck shell=bash

PKI=$STATE_DIR/pki

# issue_cert NAME SUBJECT EXT [CA]: a key and a certificate signed by CA (default: the
# cluster CA, ca) valid for a year. EXT is an openssl extension section body
# (extendedKeyUsage, subjectAltName, ...).
issue_cert() {
  local name=$1 subject=$2 ext=$3 ca=${4:-ca}
  [[ -f $PKI/$name.crt ]] && return 0
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr" 2>/dev/null
  printf '%s\n' "$ext" >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null ||
    die "openssl could not sign the certificate $name"
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# new_ca NAME COMMON_NAME: a self-signed CA NAME.crt / NAME.key, unless there is one.
new_ca() {
  local name=$1 cn=$2
  [[ -f $PKI/$name.crt ]] && return 0
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$PKI/$name.key" -subj "/CN=$cn" -days 3650 \
    -sha256 -out "$PKI/$name.crt" 2>/dev/null || die "openssl could not create the CA $name"
}

generate_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  new_ca ca stevedore-local-ca
  if [[ ! -f $PKI/sa.key ]]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  local client="extendedKeyUsage=clientAuth"
  issue_cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$SERVICE_APISERVER_IP,IP:$NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  issue_cert etcd "/CN=etcd" "extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
  issue_cert admin "/O=system:masters/CN=stevedore-admin" "$client"
  issue_cert controller-manager "/CN=system:kube-controller-manager" "$client"
  issue_cert scheduler "/CN=system:kube-scheduler" "$client"
  issue_cert kube-proxy "/CN=system:kube-proxy" "$client"
  issue_cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" "$client"
  issue_cert kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$NODE_IP,DNS:$NODE_NAME,DNS:localhost"

  issue_cert agent-serving "/CN=stevedore-agent" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$NODE_IP,DNS:$NODE_NAME,DNS:localhost"
  # Agents for simulated nodes (sim-agents.sh) all answer on the kwok node IP.
  issue_cert simulated-agent-serving "/CN=stevedore-agent-simulated" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$KWOK_NODE_IP"

  # The client certificate the apiserver presents to Stevedore's admission webhook, from
  # a CA of its own: the control plane trusts that CA for its webhook's callers and
  # nothing else (the cluster CA signs every node's and administrator's certificate).
  new_ca webhook-client-ca stevedore-webhook-client-ca
  issue_cert webhook-client "/CN=$WEBHOOK_CLIENT_NAME" "$client" webhook-client-ca
  write_admission_config

  write_kubeconfig admin "$STATE_DIR/kubeconfig"
  local c
  for c in controller-manager scheduler kube-proxy kubelet-client; do
    write_kubeconfig "$c" "$STATE_DIR/$c.kubeconfig"
  done
}

# write_kubeconfig CERT FILE [SERVER]: a kubeconfig authenticating with the client
# certificate CERT against the apiserver at SERVER (default https://127.0.0.1:PORT; a
# real worker node, in a network namespace of its own, reaches it on the node IP).
# Written in JSON (which is YAML too, so every Kubernetes tool reads it): the agent reads
# kubeconfigs only in JSON form, to keep a YAML parser out of its memory (agent/src/kube_config.rs).
# Written to a temporary file and renamed over FILE: `up` runs again while tests read the
# admin kubeconfig, and a reader must never see it half written ("no current context").
write_kubeconfig() {
  local cert=$1 file=$2 server=${3:-https://127.0.0.1:$APISERVER_PORT}
  local tmp=$file.tmp.$$
  cat >"$tmp" <<KUBECONFIG
{
  "apiVersion": "v1",
  "kind": "Config",
  "clusters": [{"name": "stevedore-local", "cluster": {
    "server": "$server",
    "certificate-authority": "$PKI/ca.crt"}}],
  "users": [{"name": "$cert", "user": {
    "client-certificate": "$PKI/$cert.crt",
    "client-key": "$PKI/$cert.key"}}],
  "contexts": [{"name": "stevedore-local", "context": {"cluster": "stevedore-local", "user": "$cert"}}],
  "current-context": "stevedore-local"
}
KUBECONFIG
  chmod 600 "$tmp"
  mv -f "$tmp" "$file"
}

# The common name of the apiserver's webhook client certificate; the control plane admits
# it by name too (STEVEDORE_WEBHOOK_CLIENT_NAMES, deploy/local/controlplane).
WEBHOOK_CLIENT_NAME=stevedore-webhook-client
# What the apiserver presents to which webhook (--admission-control-config-file).
ADMISSION_CONFIG=$STATE_DIR/admission-config.yaml

# write_admission_config: the apiserver's AdmissionConfiguration, whose webhook plugins
# present the webhook client certificate to Stevedore's webhook Service (the user named
# <service>.<namespace>.svc in their kubeconfig; the apiserver looks it up by that name,
# the port 443 left out) and to no other webhook. docs/security.md, "Admission webhook".
write_admission_config() {
  local kubeconfig=$STATE_DIR/webhook-client.kubeconfig
  cat >"$kubeconfig" <<KUBECONFIG
{
  "apiVersion": "v1",
  "kind": "Config",
  "users": [{"name": "stevedore-controlplane-webhook.kube-system.svc", "user": {
    "client-certificate": "$PKI/webhook-client.crt",
    "client-key": "$PKI/webhook-client.key"}}]
}
KUBECONFIG
  chmod 600 "$kubeconfig"
  cat >"$ADMISSION_CONFIG" <<ADMISSION
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $kubeconfig
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: $kubeconfig
ADMISSION
}
