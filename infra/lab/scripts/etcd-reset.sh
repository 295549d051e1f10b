# What `kubeadm reset` does for stacked etcd on a leaving node: stop etcd and wipe its
# data and PKI, so this machine can never rejoin with a stale identity. Removing the
# member from the cluster is the orchestrator's job (after drain, with a quorum check).
if etcd_running; then
  pid=$(cat "$PIDFILE")
  kill "$pid" 2>/dev/null || true
  wait_exit "etcd to stop" "$pid"
fi
rm -rf "${DATA:?}"/* "$PKI" "$CONF" "$PIDFILE"
log "etcd reset"
