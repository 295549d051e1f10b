# Initialises a new Kubernetes control plane on the first node with `kubeadm init`:
# kubeadm makes the PKI, kubeconfigs, static pod manifests for stacked etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler (lab-kubelet runs them),
# uploads kubeadm-config, and installs the bootstrap-token RBAC, kube-proxy and CoreDNS.
# Extra inputs: LB_ENDPOINT (host:port of the control-plane load balancer), CLUSTER_NAME,
# ENCRYPTION_AT_REST (non-empty: Secrets encrypted in etcd with a key made here, root-only; molt
# carries the file to every node that joins, orchestrator/core/host-files.ts).
# Join tokens are never printed (--skip-token-print); kubeadm's output goes to a root-only
# log on the node, and only its phase lines are echoed.
[ -n "${LB_ENDPOINT:-}" ] || die "LB_ENDPOINT is empty"
KV=$(kubeadm version -o short) || die "kubeadm does not answer"
KLOG=/var/log/molt/kubeadm.log
mkdir -p /etc/kubernetes/manifests
ENC_DIR=/etc/kubernetes/encryption-providers
ENC_ARGS="" ENC_VOLUMES=""
if [ -n "${ENCRYPTION_AT_REST:-}" ]; then
  if [ ! -f "$ENC_DIR/encryption-providers.yaml" ]; then
    mkdir -p "$ENC_DIR"
    chmod 0700 "$ENC_DIR"
    # The key exists only here (and, copied by molt over SSH, on the nodes that join).
    (
      umask 077
      key=$(head -c 32 /dev/urandom | base64)
      printf '%s\n' "apiVersion: apiserver.config.k8s.io/v1" "kind: EncryptionConfiguration" "resources:" \
        "- resources: [secrets]" "  providers:" "  - aescbc:" "      keys:" "      - name: key1" \
        "        secret: $key" "  - identity: {}" >"$ENC_DIR/encryption-providers.yaml.tmp"
      mv "$ENC_DIR/encryption-providers.yaml.tmp" "$ENC_DIR/encryption-providers.yaml"
    )
  fi
  ENC_ARGS="  - name: encryption-provider-config
    value: $ENC_DIR/encryption-providers.yaml"
  ENC_VOLUMES="  extraVolumes:
  - name: encryption-providers
    hostPath: $ENC_DIR
    mountPath: $ENC_DIR
    readOnly: true
    pathType: DirectoryOrCreate"
fi
cat > /etc/kubernetes/kubeadm-init.yaml <<CFG
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- description: "created by kubeadm init on $NODE_NAME; molt creates its own per join"
  ttl: 10m0s
localAPIEndpoint:
  advertiseAddress: $NODE_IP
  bindPort: 6443
nodeRegistration:
  name: $NODE_NAME
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: Never
skipPhases:
- preflight
- kubelet-finalize
- show-join-command
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: ${CLUSTER_NAME:-kubernetes}
kubernetesVersion: $KV
controlPlaneEndpoint: "$LB_ENDPOINT"
apiServer:
  certSANs:
  - "${LB_ENDPOINT%:*}"
  extraArgs:
  # On SIGTERM, /readyz fails at once while requests are still served for 4 s: the load
  # balancer's check (every 1 s, 2 failures) takes the server out before it stops.
  - name: shutdown-delay-duration
    value: 4s
$ENC_ARGS
$ENC_VOLUMES
networking:
  serviceSubnet: 10.96.0.0/12
  podSubnet: 10.244.0.0/16
  dnsDomain: cluster.local
etcd:
  local:
    dataDir: /var/lib/etcd
CFG
if [ ! -f /etc/kubernetes/.molt-init-done ]; then
  log "kubeadm init ($KV) behind $LB_ENDPOINT"
  if ! kubeadm init --config /etc/kubernetes/kubeadm-init.yaml --skip-token-print --skip-certificate-key-print -v=1 >>"$KLOG" 2>&1; then
    die "kubeadm init failed; last lines of $KLOG: $(grep -v -i token "$KLOG" | tail -n 15 | tr '\n' ' ')"
  fi
  grep -E '^\[[a-z-]+\] ' "$KLOG" | grep -v -i token | sed 's/^/  /' >&2 || true
  touch /etc/kubernetes/.molt-init-done
fi
api_ready() { curl -fsS --cacert /etc/kubernetes/pki/ca.crt "https://$NODE_IP:6443/readyz" >/dev/null; }
wait_for "kube-apiserver on $NODE_NAME to be ready" api_ready
log "Kubernetes $KV initialised"
