// The API endpoint VIP seen from molt (molt:apiEndpoint mode vip): which nodes hold the
// address, read over each node's own SSH session, and the release of a retiring node's
// keepalived. The VRRP election itself is keepalived's (infra/vip/keepalived.ts).
import type { VipObservation } from "../core/observations";
import { shellQuote, type SshSession } from "../../infra/remote/ssh";
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

  async keepalived(node: string, address: string, action: "release" | "resume", deadlineSeconds: number) {
    const ssh = this.session(node);
    if (!ssh) throw new Error(`no SSH session to ${node}`);
    const script = renderKeepalivedReleaseScript({ address }, action, deadlineSeconds);
    await ssh.run(`exec bash -euo pipefail -c ${shellQuote(script)}`, `keepalived ${action}`);
  }
}
