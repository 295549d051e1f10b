// `kubeadm init` for the first node of a brand-new cluster (bootstrap and disaster-
// recovery clusters). Certificates are uploaded (--upload-certs) so later nodes can join
// with a certificate key; the token and key kubeadm generates are never printed.
import { ENCRYPTION_CONFIG, renderInitConfiguration } from "./config";
import { endpointConstants, LOCAL_ENDPOINT_FUNCTION, type EndpointRouting } from "./endpoint";
import { INSTALL_FUNCTIONS, installConstants } from "./install";
import { patchConstants, WRITE_PATCHES_FUNCTION } from "./patches";
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

// The key is made on the node and stays there (root-only); molt never sees it here.
const WRITE_ENCRYPTION_CONFIG = `write_encryption_config() {
  [ -f "$ENCRYPTION_CONFIG" ] && return 0
  local key
  mkdir -p "$(dirname "$ENCRYPTION_CONFIG")"
  chmod 0700 "$(dirname "$ENCRYPTION_CONFIG")"
  key=$(head -c 32 /dev/urandom | base64)
  (
    umask 077
    printf '%s\\n' "apiVersion: apiserver.config.k8s.io/v1" "kind: EncryptionConfiguration" "resources:" \\
      "- resources: [secrets]" "  providers:" "  - aescbc:" "      keys:" "      - name: key1" \\
      "        secret: $key" "  - identity: {}" >"$ENCRYPTION_CONFIG.tmp"
  )
  mv "$ENCRYPTION_CONFIG.tmp" "$ENCRYPTION_CONFIG"
  log "made the encryption-at-rest key in $ENCRYPTION_CONFIG"
}
`;

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
      ENCRYPTION_CONFIG: settings.encryptionAtRest ? ENCRYPTION_CONFIG : "",
      ...endpointConstants(settings.controlPlaneEndpoint, endpointRouting),
      ...installConstants(settings, version),
      ...patchConstants(node, settings),
    },
    functions: [
      WRITE_ENCRYPTION_CONFIG,
      ...INSTALL_FUNCTIONS,
      NODE_STATE_FUNCTION,
      RESET_KEEPING_FOREIGN_MANIFESTS,
      TEMP_FILE_FUNCTIONS,
      LOCAL_ENDPOINT_FUNCTION,
      WRITE_PATCHES_FUNCTION,
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
    if [ -n "$ENCRYPTION_CONFIG" ]; then write_encryption_config; fi
    write_kubeadm_patches "$KUBEADM_PATCHES_DIR" "$APISERVER_GRACE_SECONDS"
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
