// Static bash shared by the init, join and reset scripts: where a node stands, and a
// temporary file that is always removed (it may hold join secrets).

/** clean: never bootstrapped; complete: kubelet, etcd and API server configured; partial: anything between. */
export const NODE_STATE_FUNCTION = `node_state() {
  if [ -f /etc/kubernetes/kubelet.conf ] && [ -f /etc/kubernetes/manifests/etcd.yaml ] && [ -f /etc/kubernetes/manifests/kube-apiserver.yaml ]; then
    echo complete
  elif [ -e /etc/kubernetes/kubelet.conf ] || [ -e /etc/kubernetes/pki/ca.crt ] || [ -d /var/lib/etcd/member ] ||
    [ -n "$(ls -A /etc/kubernetes/manifests 2>/dev/null)" ]; then
    echo partial
  else
    echo clean
  fi
}
`;

export const TEMP_FILE_FUNCTIONS = `cleanup() {
  if [ -n "\${MOLT_TMP:-}" ]; then rm -f -- "$MOLT_TMP"; fi
}
new_private_file() {
  umask 077
  MOLT_TMP=$(mktemp)
  trap cleanup EXIT
}
`;
