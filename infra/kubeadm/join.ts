// `kubeadm join --control-plane` of a new node. kubeadm adds its etcd member as a
// learner and promotes it once caught up (EtcdLearnerMode: the cluster's feature gate
// before 1.32, always from 1.32 on). The bootstrap token, certificate key and CA hash
// arrive on stdin (see join-material.ts), are checked for shape, and only ever live in
// shell variables and a 0600 file removed on exit: never in argv, logs or outputs.
import {
  CA_CERT_HASH_PLACEHOLDER,
  CERTIFICATE_KEY_PLACEHOLDER,
  TOKEN_PLACEHOLDER,
  renderJoinConfiguration,
} from "./config";
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

const READ_JOIN_MATERIAL = `read_join_material() {
  local line
  JOIN_TOKEN="" JOIN_CERTIFICATE_KEY="" JOIN_CA_CERT_HASH="" JOIN_APISERVER_GRACE_SECONDS=""
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
      token=*) JOIN_TOKEN=\${line#token=} ;;
      certificateKey=*) JOIN_CERTIFICATE_KEY=\${line#certificateKey=} ;;
      caCertHash=*) JOIN_CA_CERT_HASH=\${line#caCertHash=} ;;
      # The grace period kubeadm-config's API server flags ask for (grace.ts); not secret.
      apiServerGraceSeconds=*) JOIN_APISERVER_GRACE_SECONDS=\${line#apiServerGraceSeconds=} ;;
    esac
  done
}
require_join_material() {
  local hint="molt obtains fresh join material from a healthy control-plane node and passes it on stdin"
  if ! [[ $JOIN_TOKEN =~ ^[a-z0-9]{6}\\.[a-z0-9]{16}$ ]]; then
    log "no valid bootstrap token on stdin: $hint"
    return 1
  fi
  if ! [[ $JOIN_CERTIFICATE_KEY =~ ^[a-f0-9]{64}$ ]]; then
    log "no valid certificate key on stdin: $hint"
    return 1
  fi
  if ! [[ $JOIN_CA_CERT_HASH =~ ^sha256:[a-f0-9]{64}$ ]]; then
    log "no valid CA certificate hash on stdin: $hint"
    return 1
  fi
}
write_join_configuration() {
  local text=$KUBEADM_CONFIG
  text=\${text//"$TOKEN_PLACEHOLDER"/"$JOIN_TOKEN"}
  text=\${text//"$CERTIFICATE_KEY_PLACEHOLDER"/"$JOIN_CERTIFICATE_KEY"}
  text=\${text//"$CA_CERT_HASH_PLACEHOLDER"/"$JOIN_CA_CERT_HASH"}
  new_private_file
  printf '%s\\n' "$text" >"$MOLT_TMP"
}
`;

export function renderJoinScript(
  node: KubeadmNode,
  settings: KubeadmBootstrapSettings,
  endpointRouting: EndpointRouting = "load-balancer",
): string {
  validateNode(node);
  validateSettings(settings);
  const version = kubernetesVersion(node.kubernetesVersion);
  return renderScript({
    title:
      `kubeadm join --control-plane of ${node.name} (Kubernetes ${version.version}) through ` +
      `${settings.controlPlaneEndpoint}`,
    constants: {
      NODE_NAME: node.name,
      CRI_SOCKET: settings.criSocket ?? DEFAULT_CRI_SOCKET,
      KUBEADM_CONFIG: renderJoinConfiguration(node, version, settings),
      TOKEN_PLACEHOLDER,
      CERTIFICATE_KEY_PLACEHOLDER,
      CA_CERT_HASH_PLACEHOLDER,
      ...endpointConstants(settings.controlPlaneEndpoint, endpointRouting),
      ...installConstants(settings, version),
      ...patchConstants(node, settings),
    },
    functions: [
      ...INSTALL_FUNCTIONS,
      NODE_STATE_FUNCTION,
      RESET_KEEPING_FOREIGN_MANIFESTS,
      TEMP_FILE_FUNCTIONS,
      READ_JOIN_MATERIAL,
      LOCAL_ENDPOINT_FUNCTION,
      WRITE_PATCHES_FUNCTION,
    ],
    // stdin is read first: package managers below must not consume it.
    main: `
read_join_material
install_or_verify_runtime
if [ -n "$LOCAL_ENDPOINT_HOST" ] && [ "$(node_state)" = complete ]; then
  # Joined before (the mapping follows a join; an interrupted run may not have made it).
  route_endpoint_to_local_apiserver /etc/hosts /etc/cloud/templates/hosts.*.tmpl
fi
case "$(node_state)" in
  complete)
    log "$NODE_NAME has already joined"
    return 0
    ;;
  partial)
    require_join_material
    # An earlier attempt stopped halfway. Its etcd member (if any) is this node's own
    # learner or newest voter; the cluster's earlier members keep quorum without it.
    log "$NODE_NAME holds a partial kubeadm state from an earlier attempt: resetting it before joining again"
    reset_partial_state
    ;;
  clean)
    require_join_material
    ;;
esac
write_kubeadm_patches "$KUBEADM_PATCHES_DIR" "\${JOIN_APISERVER_GRACE_SECONDS:-$APISERVER_GRACE_SECONDS}"
write_join_configuration
log "kubeadm join --control-plane of $NODE_NAME (etcd member joins as a learner, then is promoted)"
kubeadm join --config "$MOLT_TMP" >&2
if [ -n "$LOCAL_ENDPOINT_HOST" ]; then
  # Joined through the load balancer; from now on this node's own API server serves it.
  route_endpoint_to_local_apiserver /etc/hosts /etc/cloud/templates/hosts.*.tmpl
fi
log "$NODE_NAME has joined"
`,
  });
}
