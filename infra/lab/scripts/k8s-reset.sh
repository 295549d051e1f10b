# Tears down this node's control plane before the machine is destroyed: the static pods
# are removed (lab-kubelet stops them), then etcd data, PKI and kubeconfigs are wiped so the
# machine can never come back with a stale identity. Removing the etcd member, draining
# and deleting the Node object are the orchestrator's job.
rm -f /etc/kubernetes/manifests/*.yaml
stopped() { [ -z "$(ss -ltnH '( sport = :2379 or sport = :6443 or sport = :10257 or sport = :10259 )')" ]; }
wait_for "the static pods to stop" stopped
rm -rf "${DATA:?}"/* /etc/kubernetes/* /var/lib/kubelet/pki
log "control plane reset"
