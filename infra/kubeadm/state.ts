// Static bash shared by the init, join and reset scripts: where a node stands, and a
// temporary file that is always removed (it may hold join secrets).

/**
 * clean: never bootstrapped; complete: kubelet, etcd and API server configured; partial:
 * anything between. Only kubeadm's own files count: a static pod the template brings
 * (kube-vip, a log shipper) is not a trace of an earlier attempt.
 */
export const NODE_STATE_FUNCTION = `node_state() {
  local m=/etc/kubernetes/manifests
  if [ -f /etc/kubernetes/kubelet.conf ] && [ -f "$m/etcd.yaml" ] && [ -f "$m/kube-apiserver.yaml" ]; then
    echo complete
  elif [ -e /etc/kubernetes/kubelet.conf ] || [ -e /etc/kubernetes/pki/ca.crt ] || [ -d /var/lib/etcd/member ] ||
    [ -e "$m/etcd.yaml" ] || [ -e "$m/kube-apiserver.yaml" ] ||
    [ -e "$m/kube-controller-manager.yaml" ] || [ -e "$m/kube-scheduler.yaml" ]; then
    echo partial
  else
    echo clean
  fi
}
`;

/**
 * `kubeadm reset` empties /etc/kubernetes/manifests. Static pods that are not kubeadm's
 * (baked into the template: kube-vip, node agents) are kept aside and put back, so
 * resetting a half-done attempt never removes what the image brought.
 */
export const RESET_KEEPING_FOREIGN_MANIFESTS = `reset_partial_state() {
  local m=/etc/kubernetes/manifests keep f
  keep=$(mktemp -d)
  for f in "$m"/*; do
    [ -f "$f" ] || continue
    case "$(basename "$f")" in
      etcd.yaml | kube-apiserver.yaml | kube-controller-manager.yaml | kube-scheduler.yaml) ;;
      *) cp -p "$f" "$keep/" ;;
    esac
  done
  kubeadm reset --force --cri-socket "$CRI_SOCKET" >&2
  rm -rf /var/lib/etcd
  mkdir -p "$m"
  for f in "$keep"/*; do
    [ -f "$f" ] || continue
    log "keeping the image's static pod $(basename "$f")"
    cp -p "$f" "$m/"
  done
  rm -rf "$keep"
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
