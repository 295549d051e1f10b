# Joins this node to the control plane with `kubeadm join --control-plane`, the way
# KubeOne does it: the cluster-wide CAs and service-account keys are copied from a healthy
# node (manual certificate distribution), discovery uses a fresh short-lived bootstrap
# token, and kubeadm adds the etcd member as a learner and promotes it once caught up.
# Extra inputs: LB_ENDPOINT; stdin: the join bundle ("file PATH", base64 lines, "end";
# "token TOKEN") read from a healthy node over SSH with its pinned host key.
[ -n "${LB_ENDPOINT:-}" ] || die "LB_ENDPOINT is empty"
KV=$(kubeadm version -o short) || die "kubeadm does not answer"
KLOG=/var/log/molt/kubeadm.log
# An earlier join of this machine was interrupted (its run was killed): what it left is
# reset first, as kubeadm's docs say to retry a failed join. Its etcd member, if it was
# added, is gone already: molt surges only when no member without a node is left.
if [ ! -f /etc/kubernetes/.molt-join-done ] && { [ -d "$DATA/member" ] || ls /etc/kubernetes/manifests/*.yaml >/dev/null 2>&1; }; then
  log "an earlier join of this machine was interrupted; resetting it before joining again"
  rm -f /etc/kubernetes/manifests/*.yaml
  stopped() { [ -z "$(ss -ltnH '( sport = :2379 or sport = :6443 or sport = :10257 or sport = :10259 )')" ]; }
  wait_for "the static pods of the interrupted join to stop" stopped
  rm -rf "${DATA:?}"/* /etc/kubernetes/pki /etc/kubernetes/*.conf /var/lib/kubelet/pki
fi
if [ ! -f /etc/kubernetes/.molt-join-done ]; then
  token=""
  path=""
  while IFS= read -r line; do
    case "$line" in
      "token "*) token=${line#token } ;;
      "file /etc/kubernetes/pki/"*) path=${line#file }; mkdir -p "$(dirname "$path")"; : > "$path.b64" ;;
      "file "*) die "join bundle names a file outside /etc/kubernetes/pki" ;;
      end) base64 -d < "$path.b64" > "$path.tmp" && mv "$path.tmp" "$path"; rm -f "$path.b64"; path="" ;;
      *) [ -n "$path" ] && printf '%s\n' "$line" >> "$path.b64" ;;
    esac
  done
  [ -n "$token" ] || die "no bootstrap token in the join bundle"
  [ -s /etc/kubernetes/pki/ca.crt ] || die "no cluster CA in the join bundle"
  hash=$(openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der 2>/dev/null | sha256sum | cut -d' ' -f1)
  cat > /etc/kubernetes/kubeadm-join.yaml <<CFG
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "$LB_ENDPOINT"
    token: "$token"
    caCertHashes:
    - "sha256:$hash"
nodeRegistration:
  name: $NODE_NAME
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: Never
controlPlane:
  localAPIEndpoint:
    advertiseAddress: $NODE_IP
    bindPort: 6443
skipPhases:
- preflight
CFG
  unset token
  log "kubeadm join --control-plane ($KV) through $LB_ENDPOINT"
  if ! kubeadm join --config /etc/kubernetes/kubeadm-join.yaml -v=1 >>"$KLOG" 2>&1; then
    rm -f /etc/kubernetes/kubeadm-join.yaml
    die "kubeadm join failed; last lines of $KLOG: $(grep -v -i token "$KLOG" | tail -n 15 | tr '\n' ' ')"
  fi
  rm -f /etc/kubernetes/kubeadm-join.yaml
  grep -E '^\[[a-z-]+\] ' "$KLOG" | grep -v -i token | sed 's/^/  /' >&2 || true
  touch /etc/kubernetes/.molt-join-done
fi
api_ready() { curl -fsS --cacert /etc/kubernetes/pki/ca.crt "https://$NODE_IP:6443/readyz" >/dev/null; }
wait_for "kube-apiserver on $NODE_NAME to be ready" api_ready
log "joined the control plane ($KV)"
