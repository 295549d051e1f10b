// How a control-plane node reaches controlPlaneEndpoint. Through the load balancer, except
// where the load balancer cannot send a node's own traffic back to it: Azure's load
// balancers do not hairpin, so `kubeadm init` (which waits for the API through the
// endpoint) would fail, and a kubelet would fail whenever the LB picks its own node.
// There the endpoint's name is mapped to the local API server in /etc/hosts, as Cluster
// API's Azure templates do: before `kubeadm init` on the first node, after `kubeadm join`
// on the others (the join itself must reach an existing API server through the LB).

export type EndpointRouting = "load-balancer" | "local-apiserver";

/** The host part of host:port ("api.example.com", or an address without brackets). */
export function endpointHost(controlPlaneEndpoint: string): string {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):\d+$/.exec(controlPlaneEndpoint);
  if (!m) throw new Error(`${JSON.stringify(controlPlaneEndpoint)} is not host:port`);
  return m[1] ?? m[2];
}

const ADDRESS = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)$/;

/** The constants the scripts get; refuses an address (only a name can be mapped). */
export function endpointConstants(controlPlaneEndpoint: string, routing: EndpointRouting): Record<string, string> {
  if (routing === "load-balancer") return { LOCAL_ENDPOINT_HOST: "" };
  const host = endpointHost(controlPlaneEndpoint);
  if (ADDRESS.test(host))
    throw new Error(
      `controlPlaneEndpoint ${controlPlaneEndpoint}: a DNS name is needed to reach the local API server ` +
        "where the load balancer does not hairpin (an address cannot be mapped in /etc/hosts)",
    );
  return { LOCAL_ENDPOINT_HOST: host };
}

/**
 * Static bash: adds "127.0.0.1 <name>" to the files given (ENDPOINT_HOSTS_FILES: /etc/hosts
 * and, since cloud-init rewrites /etc/hosts at every boot when it manages it, cloud-init's
 * hosts templates).
 */
export const ENDPOINT_HOSTS_FILES = "/etc/hosts /etc/cloud/templates/hosts.*.tmpl";

export const LOCAL_ENDPOINT_FUNCTION = `route_endpoint_to_local_apiserver() {
  local line="127.0.0.1 $LOCAL_ENDPOINT_HOST # molt: the API load balancer does not hairpin" f
  for f in "$@"; do
    [ -f "$f" ] || continue
    if ! grep -qF "$line" "$f"; then
      printf '%s\\n' "$line" >>"$f"
    fi
  done
  log "$LOCAL_ENDPOINT_HOST resolves to this node's own API server (127.0.0.1)"
}
`;
