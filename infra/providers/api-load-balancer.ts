// Is the load balancer molt registers nodes in the one that serves controlPlaneEndpoint? `molt
// adopt` asks before it records anything: a stack pointed at another load balancer would put
// every new node where no client reaches it, and take no adopted node out of the real one.
//
// The two halves come from two places. What the endpoint's name leads to is read where the
// nodes read it (a control-plane node's resolver, orchestrator/adopt/endpoint.ts); what the
// load balancer is (DNS names, frontend addresses, members) only the cloud's API knows, so the
// program asks it with the provider's invokes (`apiLoadBalancer` of a provider definition)
// during the preview `molt adopt` runs before its `up`. The verdict is this pure function.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

/** The API load balancer as the cloud describes it. */
export interface LoadBalancerFacts {
  /** How reports name it ("classic ELB kubeone-api-lb"). */
  name: string;
  /** Its DNS names. */
  dnsNames: string[];
  /** Its frontend addresses, where the cloud gives them (Azure); empty where only DNS names do (AWS). */
  addresses: string[];
  /** Per adopted node: is its machine a member? Absent where the cloud's description cannot tell (NLB targets). */
  members: Record<string, boolean>;
}

/** What adoption learnt of the endpoint, for the program's check. */
export interface EndpointCheck {
  /** controlPlaneEndpoint as kubeadm-config names it (host:port). */
  endpoint: string;
  /** What a control-plane node resolves its host to (`getent ahosts`); empty for an address. */
  resolved: { canonicalName?: string; addresses: string[] };
  /** The node that resolved it. */
  resolvedOn: string;
}

/** Lines of a program error that carry the check's verdict (orchestrator/adopt/record.ts reads them). */
export const ENDPOINT_CHECK_MARKER = "molt-endpoint-check:";

/** The host part of host:port (brackets of an IPv6 address removed), lowercase, without a trailing dot. */
export function endpointHost(endpoint: string): string {
  const host = endpoint.startsWith("[") ? endpoint.slice(1, endpoint.indexOf("]")) : endpoint.replace(/:\d+$/, "");
  return normalName(host);
}

const normalName = (n: string) => n.trim().toLowerCase().replace(/\.$/, "");

/**
 * What is wrong, given the addresses the load balancer's DNS names resolve to (`lbAddresses`;
 * needed only where the endpoint is an alias record, which DNS shows as addresses alone).
 */
export function endpointProblems(check: EndpointCheck, lb: LoadBalancerFacts, lbAddresses: string[] = []): string[] {
  const problems: string[] = [];
  if (!servedBy(check, lb, lbAddresses)) {
    const host = endpointHost(check.endpoint);
    const seen = isIP(host)
      ? "an address"
      : `${check.resolvedOn} resolves it to ${[
          check.resolved.canonicalName && normalName(check.resolved.canonicalName) !== host
            ? check.resolved.canonicalName
            : undefined,
          check.resolved.addresses.join(", ") || "nothing",
        ]
          .filter(Boolean)
          .join(" = ")}`;
    const its = [...lb.dnsNames, ...lb.addresses].join(", ") || "no DNS name or address";
    problems.push(
      `controlPlaneEndpoint ${check.endpoint} (kubeadm-config) is not served by ${lb.name} (${its}; ${seen}): ` +
        "molt would register new nodes where the endpoint does not lead. Name the load balancer that serves it in " +
        "the stack's settings",
    );
  }
  for (const [node, member] of Object.entries(lb.members))
    if (!member)
      problems.push(
        `${node}'s machine is not a member of ${lb.name}: it is not this cluster's load balancer, or the node was ` +
          "taken out of it; molt takes adopted nodes out of the load balancer it names when it retires them",
      );
  return problems;
}

function servedBy(check: EndpointCheck, lb: LoadBalancerFacts, lbAddresses: string[]): boolean {
  const host = endpointHost(check.endpoint);
  const names = lb.dnsNames.map(normalName);
  const canonical = check.resolved.canonicalName ? normalName(check.resolved.canonicalName) : undefined;
  if (names.includes(host) || (canonical !== undefined && names.includes(canonical))) return true;
  const addresses = new Set([...lb.addresses, ...lbAddresses]);
  return addresses.has(host) || check.resolved.addresses.some((a) => addresses.has(a));
}

/** Addresses a name resolves to here (empty when it does not resolve). */
export type Resolve = (name: string) => Promise<string[]>;

export const resolveHere: Resolve = (name) =>
  lookup(name, { all: true }).then(
    (r) => r.map((a) => a.address),
    () => [],
  );

/**
 * The check as the program runs it: resolves the load balancer's DNS names only when the
 * endpoint is neither one of them nor one of its addresses (an alias record).
 */
export async function checkEndpoint(
  check: EndpointCheck,
  lb: LoadBalancerFacts,
  resolve: Resolve = resolveHere,
): Promise<string[]> {
  const direct = endpointProblems(check, lb);
  // Only addresses the endpoint resolved to can meet the load balancer's.
  if (direct.length === 0 || lb.dnsNames.length === 0 || check.resolved.addresses.length === 0) return direct;
  const lbAddresses = (await Promise.all(lb.dnsNames.map(resolve))).flat();
  return endpointProblems(check, lb, lbAddresses);
}

/** The error that fails the program (and so `molt adopt`'s preview) with the problems. */
export function endpointCheckError(problems: string[]): Error {
  return new Error(problems.map((p) => `${ENDPOINT_CHECK_MARKER} ${p}`).join("\n"));
}

/** The problems in a failed engine run's message (one per marked line, in order, once each). */
export function endpointCheckProblemsIn(message: string): string[] {
  const found = [...message.matchAll(new RegExp(`${ENDPOINT_CHECK_MARKER} (.*)$`, "gm"))].map((m) => m[1].trim());
  return [...new Set(found)];
}
