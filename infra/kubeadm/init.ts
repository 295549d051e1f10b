// `kubeadm init` for the first node of a brand-new cluster (bootstrap and disaster-
// recovery clusters). Certificates are uploaded (--upload-certs) so later nodes can join
// with a certificate key; the token and key kubeadm generates are never printed.
import { renderInitConfiguration } from "./config";
import { INSTALL_FUNCTIONS, installConstants } from "./install";
import { renderScript } from "./script";
import {
  DEFAULT_CRI_SOCKET,
  kubernetesVersion,
  validateNode,
  validateSettings,
  type KubeadmBootstrapSettings,
  type KubeadmNode,
} from "./settings";
import { NODE_STATE_FUNCTION, TEMP_FILE_FUNCTIONS } from "./state";

export function renderInitScript(node: KubeadmNode, settings: KubeadmBootstrapSettings): string {
  validateNode(node);
  validateSettings(settings);
  const version = kubernetesVersion(node.kubernetesVersion);
  return renderScript({
    title: `kubeadm init of ${node.name} (Kubernetes ${version.version}), the first node of a new cluster`,
    constants: {
      NODE_NAME: node.name,
      CRI_SOCKET: settings.criSocket ?? DEFAULT_CRI_SOCKET,
      CNI_MANIFEST: settings.cniManifest ?? "",
      KUBEADM_CONFIG: renderInitConfiguration(node, version, settings),
      ...installConstants(settings.install, version),
    },
    functions: [...INSTALL_FUNCTIONS, NODE_STATE_FUNCTION, TEMP_FILE_FUNCTIONS],
    main: `
install_or_verify_runtime
case "$(node_state)" in
  complete)
    log "$NODE_NAME is already initialised"
    ;;
  partial)
    log "$NODE_NAME holds a partial kubeadm state from an earlier attempt: resetting it before kubeadm init"
    kubeadm reset --force --cri-socket "$CRI_SOCKET" >&2
    rm -rf /var/lib/etcd
    ;&
  clean)
    new_private_file
    printf '%s\\n' "$KUBEADM_CONFIG" >"$MOLT_TMP"
    log "kubeadm init of $NODE_NAME"
    kubeadm init --config "$MOLT_TMP" --upload-certs --skip-token-print --skip-certificate-key-print >&2
    ;;
esac
if [ -n "$CNI_MANIFEST" ]; then
  log "applying the network add-on $CNI_MANIFEST"
  kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f "$CNI_MANIFEST" >&2
fi
log "$NODE_NAME is initialised"
`,
  });
}
