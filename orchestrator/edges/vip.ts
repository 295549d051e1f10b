// The API endpoint VIP seen from molt (molt:apiEndpoint mode vip): which nodes hold the
// address, read over each node's own SSH session, and the release of a retiring node's
// keepalived. The VRRP election itself is keepalived's (infra/vip/keepalived.ts).
import type { VipObservation } from "../core/observations";
import { shellQuote, type SshSession } from "../../infra/remote/ssh";
import { isIPv4 } from "../core/addresses";
import { sudoFor } from "./etcd";
import { renderKeepalivedReleaseScript, STATE_FILE } from "../../infra/vip/keepalived";
import type { VipEdge } from "../core/edges";

/** The node's addresses as `ip -o -4 addr show` lists them. */
export function addressesIn(ipOutput: string): string[] {
  return ipOutput
    .split("\n")
    .map((l) => /\sinet\s+([0-9.]+)\//.exec(l)?.[1])
    .filter((a): a is string => a !== undefined);
}

/** The VIP edge over the nodes' SSH sessions. */
export class SshVip implements VipEdge {
  constructor(private readonly session: (node: string) => SshSession | undefined) {}

  async observe(address: string, nodes: string[]): Promise<VipObservation> {
    const holders: string[] = [];
    const unobserved: string[] = [];
    const states: Record<string, string> = {};
    await Promise.all(
      nodes.map(async (n) => {
        const ssh = this.session(n);
        if (!ssh) return void unobserved.push(n);
        try {
          const r = await ssh.exec(
            `ip -o -4 addr show && echo '--molt--' && { cat ${STATE_FILE} 2>/dev/null || true; }`,
          );
          if (r.code !== 0) return void unobserved.push(n);
          const [addrs, state = ""] = r.stdout.split("--molt--\n");
          if (addressesIn(addrs).includes(address)) holders.push(n);
          if (/^[A-Z]+$/.test(state.trim())) states[n] = state.trim();
        } catch {
          unobserved.push(n);
        }
      }),
    );
    return { address, holders: holders.sort(), unobserved: unobserved.sort(), states };
  }

  async answers(node: string, address: string, endpoint: "apiserver" | "etcd"): Promise<boolean> {
    const ssh = this.session(node);
    if (!ssh || !isIPv4(address)) return false;
    const r = await ssh.exec(endpointCheck(address, endpoint, sudoFor(ssh.target.user))).catch(() => undefined);
    return r?.code === 0;
  }

  async keepalived(node: string, address: string, action: "release" | "resume", deadlineSeconds: number) {
    const ssh = this.session(node);
    if (!ssh) throw new Error(`no SSH session to ${node}`);
    const script = renderKeepalivedReleaseScript({ address }, action, deadlineSeconds);
    await ssh.run(`exec bash -euo pipefail -c ${shellQuote(script)}`, `keepalived ${action}`);
  }
}

/**
 * One request to the endpoint through the VIP, verified against the cluster's CA under a
 * name every serving certificate carries (kubeadm's "kubernetes"; etcd's "localhost").
 */
export function endpointCheck(address: string, endpoint: "apiserver" | "etcd", sudo = ""): string {
  if (endpoint === "apiserver")
    return (
      `${sudo}curl -fsS --max-time 2 --cacert /etc/kubernetes/pki/ca.crt --resolve kubernetes:6443:${address} ` +
      "-o /dev/null https://kubernetes:6443/readyz"
    );
  const pki = "/etc/kubernetes/pki/etcd";
  return (
    `${sudo}curl -fsS --max-time 2 --cacert ${pki}/ca.crt --cert ${pki}/healthcheck-client.crt ` +
    `--key ${pki}/healthcheck-client.key --resolve localhost:2379:${address} https://localhost:2379/health ` +
    `| grep -q '"health":"true"'`
  );
}
