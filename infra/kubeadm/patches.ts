// The node's kubeadm patches (infra/kubeadm/config.ts kubeadmPatchFiles), written by the init
// and join scripts where their kubeadm configuration points kubeadm at them, before kubeadm runs.
import { APISERVER_PATCH_FILE, KUBEADM_PATCHES_DIR, KUBELET_PATCH_FILE, kubeadmPatchFiles } from "./config";
import { apiServerGracePeriodSeconds } from "./grace";
import { DEFAULT_SHUTDOWN_DELAY_SECONDS, type KubeadmBootstrapSettings, type KubeadmNode } from "./settings";

/**
 * The scripts' constants for the patches. APISERVER_GRACE_SECONDS is the grace period molt's
 * settings give (grace.ts); a join replaces it with the one of the cluster's kubeadm-config,
 * when its join material carries one (join.ts read_join_material).
 */
export function patchConstants(node: KubeadmNode, s: KubeadmBootstrapSettings): Record<string, string> {
  const grace = apiServerGracePeriodSeconds(s.apiServerShutdownDelaySeconds ?? DEFAULT_SHUTDOWN_DELAY_SECONDS);
  return {
    KUBEADM_PATCHES_DIR,
    KUBELET_CONFIG_PATCH: kubeadmPatchFiles(node, grace)[KUBELET_PATCH_FILE] ?? "",
    APISERVER_GRACE_SECONDS: String(grace),
  };
}

/**
 * `write_kubeadm_patches DIR GRACE`: the kube-apiserver Pod's grace period of GRACE seconds
 * (config.ts apiServerPatch, the same text) and the kubelet configuration patch, when the
 * node has one.
 */
export const WRITE_PATCHES_FUNCTION = `write_kubeadm_patches() {
  local dir=$1 grace=$2
  if ! [[ $grace =~ ^[1-9][0-9]{0,4}$ ]]; then
    log "the API server's grace period \\"$grace\\" is not a whole number of seconds from 1 to 99999"
    return 1
  fi
  install -d -m 0755 "$dir"
  printf 'spec:\\n  terminationGracePeriodSeconds: %s\\n' "$grace" >"$dir/${APISERVER_PATCH_FILE}"
  log "the API server's termination grace period: $grace s"
  [ -n "$KUBELET_CONFIG_PATCH" ] || return 0
  printf '%s' "$KUBELET_CONFIG_PATCH" >"$dir/${KUBELET_PATCH_FILE}"
  log "the kubelet's providerID: $(cat "$dir/${KUBELET_PATCH_FILE}")"
}
`;
