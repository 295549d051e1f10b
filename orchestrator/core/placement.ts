// Failure-domain placement for control-plane nodes, the way Cluster API's
// KubeadmControlPlane spreads machines (failuredomains.PickFewest / PickMost):
//   - a new node goes to the domain with the fewest up-to-date nodes (then the fewest
//     nodes overall), so a rollout refills every domain with new nodes evenly;
//   - a node is retired from the domain with the most nodes among those holding a
//     retirement candidate, oldest first, and nodes outside every known domain go first.
// Ties are broken by the order of `domains`, so the answer is deterministic.
// Pure functions over plain data; the orchestrator supplies the snapshot.

export interface PlacedNode {
  name: string;
  /** The node's failure domain; absent on providers without domains. */
  failureDomain?: string;
  /** True when the node already runs the desired image and Kubernetes version. */
  upToDate: boolean;
  /** Creation order, strictly increasing (NodeEntry.generation). */
  generation: number;
}

function countBy(domains: readonly string[], nodes: readonly PlacedNode[]): Map<string, number> {
  const counts = new Map<string, number>(domains.map((d) => [d, 0]));
  for (const n of nodes) {
    if (n.failureDomain !== undefined && counts.has(n.failureDomain)) {
      counts.set(n.failureDomain, (counts.get(n.failureDomain) ?? 0) + 1);
    }
  }
  return counts;
}

function assertDistinct(domains: readonly string[]): void {
  if (new Set(domains).size !== domains.length) {
    throw new Error(`failure domains must be distinct, got [${domains.join(", ")}]`);
  }
}

/**
 * The failure domain for the next new node: fewest up-to-date nodes, then fewest nodes
 * overall, then the first in `domains`. Undefined when there are no domains.
 */
export function selectFailureDomainForNewNode(
  domains: readonly string[],
  nodes: readonly PlacedNode[],
): string | undefined {
  assertDistinct(domains);
  if (domains.length === 0) return undefined;
  const upToDate = countBy(
    domains,
    nodes.filter((n) => n.upToDate),
  );
  const all = countBy(domains, nodes);
  let best = domains[0];
  for (const d of domains.slice(1)) {
    const du = upToDate.get(d) ?? 0;
    const bu = upToDate.get(best) ?? 0;
    if (du < bu || (du === bu && (all.get(d) ?? 0) < (all.get(best) ?? 0))) best = d;
  }
  return best;
}

/**
 * The failure domain to retire a node from, given the retirement candidates (usually
 * the outdated nodes): candidates outside every known domain first (their domain was
 * removed from the settings, or they have none); otherwise, among domains holding a
 * candidate, the one with the most nodes overall, then the first in `domains`.
 * Returns `{ domain: undefined }` for candidates without a domain, or undefined when
 * there is no candidate at all.
 */
export function selectFailureDomainForRetirement(
  domains: readonly string[],
  nodes: readonly PlacedNode[],
  candidates: readonly PlacedNode[],
): { domain: string | undefined } | undefined {
  assertDistinct(domains);
  if (candidates.length === 0) return undefined;
  const known = new Set(domains);
  const stray = candidates.filter((n) => n.failureDomain === undefined || !known.has(n.failureDomain));
  if (stray.length > 0) return { domain: oldest(stray).failureDomain };
  const all = countBy(domains, nodes);
  const withCandidate = domains.filter((d) => candidates.some((n) => n.failureDomain === d));
  let best = withCandidate[0];
  for (const d of withCandidate.slice(1)) {
    if ((all.get(d) ?? 0) > (all.get(best) ?? 0)) best = d;
  }
  return { domain: best };
}

/**
 * The node to retire: the oldest candidate in the domain chosen by
 * selectFailureDomainForRetirement. Undefined when there is no candidate.
 */
export function selectNodeForRetirement(
  domains: readonly string[],
  nodes: readonly PlacedNode[],
  candidates: readonly PlacedNode[],
): PlacedNode | undefined {
  const choice = selectFailureDomainForRetirement(domains, nodes, candidates);
  if (!choice) return undefined;
  const inDomain = candidates.filter((n) => n.failureDomain === choice.domain);
  return oldest(inDomain);
}

function oldest<T extends PlacedNode>(nodes: readonly T[]): T {
  return nodes.reduce((a, b) => (b.generation < a.generation ? b : a));
}

/**
 * The entry with its failure domain chosen, for a node about to be appended to `nodes`:
 * selectFailureDomainForNewNode, where "up to date" means the same image and Kubernetes
 * version as the new entry (which is what the intent asks for). An entry that already
 * has a domain keeps it, and nothing else in `nodes` is looked at again: a node's domain
 * is decided once, when its entry is created, and is stored with it.
 */
export function assignFailureDomain<E extends PlacedEntry>(
  entry: E,
  nodes: readonly PlacedEntry[],
  domains: readonly string[],
): E {
  if (entry.failureDomain !== undefined) return entry;
  const failureDomain = selectFailureDomainForNewNode(
    domains,
    nodes.map((n) => ({
      name: n.name,
      failureDomain: n.failureDomain,
      generation: n.generation,
      upToDate: n.image === entry.image && n.kubernetesVersion === entry.kubernetesVersion,
    })),
  );
  return failureDomain === undefined ? entry : { ...entry, failureDomain };
}

/** The fields of a node entry (infra/node.ts NodeEntry) placement reads. */
export interface PlacedEntry {
  name: string;
  image: string;
  kubernetesVersion?: string;
  failureDomain?: string;
  generation: number;
}
