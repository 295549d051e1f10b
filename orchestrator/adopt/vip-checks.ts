// Adoption in VIP mode (molt:apiEndpoint mode vip): the cluster's API endpoint is a VIP that
// keepalived on the hosts moves (KubeOne's vSphere example). Each host's keepalived.conf is
// read over SSH and must run one VRRP group for the configured VIP that molt's nodes can
// join (core/keepalived-conf.ts); exactly one host holds the VIP now. What is recorded is
// each host's priority; the group's auth_pass is compared, remembered as a secret (never
// reported), and not recorded: a joining node reads it from a member (infra/vip/group-auth.ts).
import { KEEPALIVED_CONF_PATH, vrrpGroupOf, vrrpGroupProblems, type VrrpGroup } from "../core/keepalived-conf";
import type { VipSettings } from "../../infra/vip/keepalived";
import type { SshSession } from "../../infra/remote/ssh";
import { rememberSecret } from "../report/redact";
import { addressesIn } from "../edges/vip";
import { sudoFor } from "../edges/etcd";
import type { AdoptionHost } from "./input";

export interface HostKeepalived {
  /** The host's keepalived.conf (holds the auth_pass: parsed here, never kept or shown). */
  conf?: string;
  /** `ip -o -4 addr show` on the host. */
  addresses: string;
}

/** What each host runs, read over its session. */
export async function readHostKeepalived(ssh: SshSession): Promise<HostKeepalived> {
  const sudo = sudoFor(ssh.target.user);
  const conf = await ssh.exec(`${sudo}cat ${KEEPALIVED_CONF_PATH}`);
  const ip = await ssh.exec("ip -o -4 addr show");
  return { ...(conf.code === 0 ? { conf: conf.stdout } : {}), addresses: ip.stdout };
}

/**
 * The hosts' VRRP group against the stack's VIP settings: problems (refuse) or each host's
 * priority while its checks pass (recorded on its entry).
 */
export function vipGroupChecks(
  hosts: AdoptionHost[],
  seen: Map<AdoptionHost, HostKeepalived>,
  vip: VipSettings,
): { problems: string[]; priorities: Map<AdoptionHost, number>; detail: string } {
  const problems: string[] = [];
  const groups: { host: string; group: VrrpGroup }[] = [];
  const priorities = new Map<AdoptionHost, number>();
  const holders: string[] = [];
  for (const h of hosts) {
    const k = seen.get(h)!;
    if (addressesIn(k.addresses).includes(vip.address)) holders.push(h.address);
    if (k.conf === undefined) {
      problems.push(
        `host ${h.address} has no readable ${KEEPALIVED_CONF_PATH}: molt:apiEndpoint mode vip joins the ` +
          "keepalived group that moves the VIP on the control-plane hosts; if the endpoint is served otherwise " +
          "(a load balancer VM such as gobetween), use molt:apiEndpoint mode loadBalancer",
      );
      continue;
    }
    const r = vrrpGroupOf(k.conf, vip.address, h.address);
    if (!("group" in r)) {
      problems.push(...r.problems);
      continue;
    }
    rememberSecret(r.group.auth?.pass);
    groups.push({ host: h.address, group: r.group });
    priorities.set(h, r.group.effectivePriority);
  }
  if (problems.length === 0) problems.push(...vrrpGroupProblems(groups, vip));
  if (holders.length !== 1)
    problems.push(
      holders.length === 0
        ? `no host holds the API endpoint VIP ${vip.address}: adoption needs the group settled (one holder); ` +
            "check keepalived on the hosts"
        : `the API endpoint VIP ${vip.address} is on ${holders.join(" and ")} at once: the group is split ` +
            "(VRRP adverts do not reach each other, or another router uses its virtual_router_id); fix it first",
    );
  const g = groups[0]?.group;
  const detail = g
    ? `keepalived group virtual_router_id ${g.virtualRouterId} for ${vip.address} on ${groups.length} hosts ` +
      `(${g.auth ? `auth_type ${g.auth.type}` : "no authentication"}, priorities ` +
      `${groups.map((x) => x.group.effectivePriority).join("/")}), held by ${holders.join(", ")}`
    : "";
  return { problems, priorities, detail };
}
