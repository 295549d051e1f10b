// `kubeadm init` for the first node of a brand-new cluster (bootstrap and disaster-
// recovery clusters). Certificates are uploaded (--upload-certs) so later nodes can join
// with a certificate key; the token and key kubeadm generates are never printed.
import { renderInitConfiguration } from "./config";
import { endpointConstants, LOCAL_ENDPOINT_FUNCTION, type EndpointRouting } from "./endpoint";
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
import { NODE_STATE_FUNCTION, RESET_KEEPING_FOREIGN_MANIFESTS, TEMP_FILE_FUNCTIONS } from "./state";

export function renderInitScript(
  node: KubeadmNode,
  settings: KubeadmBootstrapSettings,
  endpointRouting: EndpointRouting = "load-balancer",
): string {
  validateNode(node);
  validateSettings(settings);
  const version = kubernetesVersion(node.kubernetesVersion);
  return renderScript({
    title: `kubeadm init of ${node.name} (Kubernetes ${version.version}), the first node of a new cluster`,
    constants: {
      NODE_NAME: node.name,
      CRI_SOCKET: settings.criSocket ?? DEFAULT_CRI_SOCKET,
      // "none": the cluster gets its network add-on another way.
      CNI_MANIFEST: settings.cniManifest === "none" ? "" : (settings.cniManifest ?? ""),
      KUBEADM_CONFIG: renderInitConfiguration(node, version, settings),
      ...endpointConstants(settings.controlPlaneEndpoint, endpointRouting),
      ...installConstants(settings, version),
    },
    functions: [
      ...INSTALL_FUNCTIONS,
      NODE_STATE_FUNCTION,
      RESET_KEEPING_FOREIGN_MANIFESTS,
      TEMP_FILE_FUNCTIONS,
      LOCAL_ENDPOINT_FUNCTION,
    ],
    main: `
install_or_verify_runtime
if [ -n "$LOCAL_ENDPOINT_HOST" ]; then
  # kubeadm init waits for the API through the endpoint, which is this node's own.
  route_endpoint_to_local_apiserver /etc/hosts /etc/cloud/templates/hosts.*.tmpl
fi
case "$(node_state)" in
  complete)
    log "$NODE_NAME is already initialised"
    ;;
  partial)
    log "$NODE_NAME holds a partial kubeadm state from an earlier attempt: resetting it before kubeadm init"
    reset_partial_state
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
