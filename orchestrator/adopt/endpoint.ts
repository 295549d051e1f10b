// What controlPlaneEndpoint's host leads to, as the cluster's nodes see it: resolved on a
// control-plane node (its resolver, private zones included), for the program's check that the
// stack's load balancer serves it (infra/providers/api-load-balancer.ts).
import { isIP } from "node:net";
import { endpointHost, type EndpointCheck } from "../../infra/providers/api-load-balancer";
import { shellQuote, type SshSession } from "../../infra/remote/ssh";

/** `getent ahosts`: "ADDRESS STREAM CANONICAL-NAME" first, then further addresses and socket types. */
export function parseGetent(out: string): EndpointCheck["resolved"] {
  const lines = out
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[0] && isIP(f[0]));
  const canonicalName = lines.find((f) => f[2])?.[2];
  return { ...(canonicalName ? { canonicalName } : {}), addresses: [...new Set(lines.map((f) => f[0]))] };
}

/** The endpoint as `node` resolves it (an address is taken as it is). */
export async function resolveEndpoint(ssh: SshSession, node: string, endpoint: string): Promise<EndpointCheck> {
  const host = endpointHost(endpoint);
  if (isIP(host)) return { endpoint, resolved: { addresses: [] }, resolvedOn: node };
  const r = await ssh.exec(`getent ahosts ${shellQuote(host)}`);
  // getent exits 2 for a name it cannot resolve: that is an answer (nothing), not a failure.
  return { endpoint, resolved: r.code === 0 ? parseGetent(r.stdout) : { addresses: [] }, resolvedOn: node };
}
