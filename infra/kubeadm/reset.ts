// Teardown of a node (RemoteCommand delete): `kubeadm reset` and a wiped etcd data dir,
// so a removed member can never come back with stale data. By default the etcd member is
// left to molt's orchestrator, which removes it after drain and a quorum check. A machine
// molt prunes is destroyed without it (infra/remote/teardown.ts); it runs where a machine
// is torn down otherwise (a rollback of a node that answers, a destroy outside molt).
import { renderScript } from "./script";
import { DEFAULT_CRI_SOCKET, type KubeadmBootstrapSettings } from "./settings";
import { NODE_STATE_FUNCTION } from "./state";

export function renderResetScript(
  nodeName: string,
  settings: Pick<KubeadmBootstrapSettings, "criSocket" | "removeEtcdMemberOnReset">,
): string {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(nodeName))
    throw new Error(`node name ${JSON.stringify(nodeName)} is not a DNS-1123 label`);
  return renderScript({
    title: `kubeadm reset of ${nodeName}`,
    constants: {
      NODE_NAME: nodeName,
      CRI_SOCKET: settings.criSocket ?? DEFAULT_CRI_SOCKET,
      RESET_PHASES_TO_SKIP: settings.removeEtcdMemberOnReset ? "" : "remove-etcd-member",
    },
    functions: [NODE_STATE_FUNCTION],
    main: `
if ! command -v kubeadm >/dev/null 2>&1; then
  log "kubeadm is not installed on $NODE_NAME: nothing to reset"
elif [ "$(node_state)" = clean ]; then
  log "$NODE_NAME holds no kubeadm state: nothing to reset"
elif [ -n "$RESET_PHASES_TO_SKIP" ]; then
  log "kubeadm reset of $NODE_NAME (its etcd member is removed by molt, not here)"
  kubeadm reset --force --cri-socket "$CRI_SOCKET" --skip-phases "$RESET_PHASES_TO_SKIP" >&2
else
  log "kubeadm reset of $NODE_NAME, including its etcd member"
  kubeadm reset --force --cri-socket "$CRI_SOCKET" >&2
fi
if systemctl is-active --quiet kubelet 2>/dev/null; then
  systemctl stop kubelet
fi
rm -rf /var/lib/etcd
log "$NODE_NAME is reset"
`,
  });
}
