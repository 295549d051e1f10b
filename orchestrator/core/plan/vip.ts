// The planner's rules for an API endpoint VIP (molt:apiEndpoint mode vip), pure like decide.ts:
// exactly one node holds the VIP before anything changes, and a node to be retired gives it
// away first, so the endpoint never sits on a node that is losing its member or API server.
import type { Operation, VipObservation, World } from "../model";
import { isOutdated } from "./rules";

/** A wait or refusal while the VIP is not held by exactly one node; undefined when it is (or no VIP). */
export function vipCondition(s: World): Operation | undefined {
  const vip = s.vip;
  if (!s.intent.vip || !vip || vip.holders.length === 1) return undefined;
  const unobserved = vip.unobserved.length ? ` (not observed: ${vip.unobserved.join(", ")})` : "";
  const why =
    vip.holders.length === 0
      ? `no node holds the API endpoint VIP ${vip.address}${unobserved}`
      : `the API endpoint VIP ${vip.address} is held by ${vip.holders.join(" and ")} at once ` +
        "(VRRP adverts do not reach each other, or another router uses the virtual_router_id)";
  if (s.expired.includes("vip"))
    return {
      kind: "refuse",
      condition: "APIEndpointAvailable",
      reason:
        `${why}; no node was changed. ` +
        "Check keepalived on the nodes (journal or /var/log/molt/keepalived.log in the lab)",
    };
  return { kind: "wait", key: "vip", reason: `waiting for exactly one node to hold the VIP: ${why}` };
}

/**
 * The node to retire holds the VIP: it releases it before it is drained or loses its
 * member, once an up-to-date node is an eligible backup (keepalived in BACKUP: its own
 * endpoint passes the track script), so the VIP moves to a node that stays. Nodes whose
 * keepalived records no state (set up by an older molt) are not waited for.
 */
export function vipRelease(s: World, victim: string): Operation | undefined {
  if (!s.intent.vip || !s.vip?.holders.includes(victim)) return undefined;
  const states = s.vip.states ?? {};
  const candidates = s.nodes.filter((n) => n.name !== victim && !isOutdated(n, s.intent, s.certificates));
  const recorded = candidates.filter((n) => states[n.name] !== undefined);
  if (recorded.length > 0 && !recorded.some((n) => states[n.name] === "BACKUP")) {
    const seen = recorded.map((n) => `${n.name}: ${states[n.name]}`).join(", ");
    if (s.expired.includes("vip"))
      return {
        kind: "refuse",
        condition: "APIEndpointAvailable",
        reason:
          `no up-to-date node could take the API endpoint VIP over from ${victim} (${seen}); no node was changed. ` +
          "Check keepalived's track script on them (their own API server or etcd must answer it)",
      };
    return {
      kind: "wait",
      key: "vip",
      node: victim,
      reason: `waiting for an up-to-date node to be eligible for the VIP before ${victim} releases it (${seen})`,
    };
  }
  return {
    kind: "release-vip",
    node: victim,
    reason: `retire ${victim}: it holds the API endpoint VIP ${s.vip.address}; hand it to another node first`,
  };
}

/** What the hand-off of a released VIP has reached (act/endpoint.ts polls it with a deadline). */
export type HandOff =
  | { done: true; holder: string }
  /** `ask`: only the answer through the VIP is missing (the caller asks, then decides again). */
  | { done: false; why: string; ask?: true };

/**
 * The VIP has left `victim` for good once exactly one other node holds it, that node's
 * keepalived calls itself MASTER (when it records a state: an adopted node's does not),
 * and a request to the endpoint through the VIP was answered (`answered`: asked only
 * once the first two hold). Until then the retirement waits; past its deadline keepalived
 * is started again on the victim and nothing is removed.
 */
export function vipHandOff(v: VipObservation, victim: string, answered?: boolean): HandOff {
  const others = v.holders.filter((h) => h !== victim);
  const unobserved = v.unobserved.length ? `; not observed: ${v.unobserved.join(", ")}` : "";
  if (v.holders.includes(victim)) return { done: false, why: `${victim} still holds ${v.address}${unobserved}` };
  if (others.length !== 1)
    return {
      done: false,
      why: `${v.address} is held by ${others.join(" and ") || "no node"}${unobserved}`,
    };
  const holder = others[0];
  const state = v.states[holder];
  if (state !== undefined && state !== "MASTER")
    return { done: false, why: `${holder} holds ${v.address} but its keepalived records ${state}, not MASTER` };
  if (answered !== true)
    return {
      done: false,
      why: `${holder} holds ${v.address}; the endpoint has not answered through it yet`,
      ...(answered === undefined ? { ask: true as const } : {}),
    };
  return { done: true, holder };
}
