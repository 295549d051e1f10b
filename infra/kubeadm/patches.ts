// The node's kubeadm patches (infra/kubeadm/config.ts kubeadmPatchFiles), written by the init
// and join scripts where their kubeadm configuration points kubeadm at them, before kubeadm runs.
import { KUBEADM_PATCHES_DIR, kubeadmPatchFiles } from "./config";
import type { KubeadmNode } from "./settings";

const KUBELET_PATCH_FILE = "kubeletconfiguration+merge.yaml";

export function patchConstants(node: KubeadmNode): Record<string, string> {
  return { KUBEADM_PATCHES_DIR, KUBELET_CONFIG_PATCH: kubeadmPatchFiles(node)[KUBELET_PATCH_FILE] ?? "" };
}

/** `write_kubeadm_patches DIR`: the kubelet configuration patch, when the node has one. */
export const WRITE_PATCHES_FUNCTION = `write_kubeadm_patches() {
  local dir=$1
  [ -n "$KUBELET_CONFIG_PATCH" ] || return 0
  install -d -m 0755 "$dir"
  printf '%s' "$KUBELET_CONFIG_PATCH" >"$dir/${KUBELET_PATCH_FILE}"
  log "the kubelet's providerID: $(cat "$dir/${KUBELET_PATCH_FILE}")"
}
`;
