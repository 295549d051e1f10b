// Targeted `up`: each change to the node list touches one node, so the engine is told
// exactly which resources it may create, diff or delete. The rest of the stack is carried
// over unchanged, without a provider call, so a step costs the same in a 3-node and a
// 7-node stack. A pure function over the exported state, so its rules are table-tested.
//
// What a step targets:
//  - the node's own resources: the component named after the node, and every resource
//    named `<node>-…` (its children and, on the clouds, its host key), resolving each name
//    to the longest node name it starts with (so `s-cp-3-x-lb` belongs to `s-cp-3-x`);
//  - for a node not yet in the state (a surge), name globs for the same;
//  - every resource that depends on one of those, transitively (through `dependencies`,
//    property dependencies, `deletedWith` and `parent`). The engine carries an untargeted
//    resource over with the dependencies it had; if one of them is a resource being
//    deleted, the engine silently skips that delete. Targeting the dependents too lets
//    them be re-registered with their new inputs first (molt's nodes depend on the node
//    they joined through);
//  - every resource that belongs to no node (the load balancer, the SSH client key, a
//    vSphere anti-affinity rule over all VMs, ...): few, cheap to diff, and some follow
//    the node list. Every node depends on some of them, so the program registers every
//    node in every change: the engine refuses an `up` that leaves out a resource depending
//    on a target (diagnostic 2014; test/integration/engine.test.ts);
//  - the providers' cluster-wide components and their children by type, even when they
//    are not in the state yet: the engine does not create an untargeted new resource (a
//    vSphere rule first needed with the second node, an Azure availability set added to
//    an existing stack), and refuses a targeted one that depends on it.
import { CLUSTER_WIDE_TYPES } from "../../infra/providers/registry";

export interface StateResource {
  urn: string;
  type: string;
  /** The provider's id of the resource (a cloud machine's instance id). */
  id?: string;
  parent?: string;
  dependencies?: string[];
  propertyDependencies?: Record<string, string[]>;
  deletedWith?: string;
}

/** The resource name at the end of a URN (`urn:pulumi:stack::project::type$type::name`). */
export function urnName(urn: string): string {
  const i = urn.lastIndexOf("::");
  return i < 0 ? urn : urn.slice(i + 2);
}

/** The node a resource belongs to, by name: the longest node name it is, or starts with followed by `-`. */
export function ownerOf(name: string, nodeNames: readonly string[]): string | undefined {
  let best: string | undefined;
  for (const n of nodeNames)
    if ((name === n || name.startsWith(n + "-")) && (!best || n.length > best.length)) best = n;
  return best;
}

const ENGINE_OWNED = (r: StateResource) => r.type === "pulumi:pulumi:Stack" || r.type.startsWith("pulumi:providers:");

export interface TargetPlan {
  /** URNs and URN globs for `up --target`. */
  targets: string[];
  /** URNs of resources of `node` in the state (a prune must see all of them gone afterwards). */
  nodeResources: string[];
}

/**
 * Targets for a change that adds or removes `node`. `nodeNames` are all node names the
 * stack knows (stored list plus the new entry). Returns undefined when the whole stack
 * must be updated (an empty state: the first node creates the cluster-wide resources).
 */
export function targetsFor(
  resources: readonly StateResource[],
  node: string,
  nodeNames: readonly string[],
  clusterWideTypes: readonly string[] = CLUSTER_WIDE_TYPES,
): TargetPlan | undefined {
  const real = resources.filter((r) => !ENGINE_OWNED(r));
  if (real.length === 0) return undefined;
  const names = nodeNames.includes(node) ? nodeNames : [...nodeNames, node];
  const owned = real.filter((r) => ownerOf(urnName(r.urn), names) === node).map((r) => r.urn);
  const target = new Set<string>(owned);
  for (const r of real) if (ownerOf(urnName(r.urn), names) === undefined) target.add(r.urn);

  // Dependents, transitively.
  for (const u of dependentsOf(real, owned)) target.add(u);
  // A node not (fully) in the state yet: its resources by name. `**` spans the type and
  // parent parts of the URN; the name part is matched exactly or as `<node>-…`.
  const escaped = node.replace(/[*?[\]\\]/g, "\\$&");
  const globs = [
    `**::${escaped}`,
    `**::${escaped}-*`,
    ...clusterWideTypes.flatMap((t) => [`**::${t}::*`, `**::${t}$**`]),
  ];
  return { targets: [...globs, ...[...target].sort()], nodeResources: owned.sort() };
}

const refs = (r: StateResource): string[] => [
  ...(r.dependencies ?? []),
  ...Object.values(r.propertyDependencies ?? {}).flat(),
  ...(r.deletedWith ? [r.deletedWith] : []),
  ...(r.parent ? [r.parent] : []),
];

/** `start` and every resource that depends on one of them, transitively (the dependents only). */
function dependentsOf(real: readonly StateResource[], start: readonly string[]): string[] {
  const closure = new Set<string>(start);
  const found: string[] = [];
  for (let grew = true; grew;) {
    grew = false;
    for (const r of real) {
      if (closure.has(r.urn) || !refs(r).some((u) => closure.has(u))) continue;
      closure.add(r.urn);
      found.push(r.urn);
      grew = true;
    }
  }
  return found;
}

/**
 * Resources of one node whose stored dependencies reach another node's resources (a join
 * through another node), and what depends on them. After a killed or failed `up` that was
 * dropping a node, these may have been re-registered with the dependencies of the list it
 * was writing; an `up` of another list must target them, or the engine carries them over
 * with their stored dependencies, registers those ahead of the program, and then refuses the
 * program's own registration ("Duplicate resource URN"). A node's machine depends only on its
 * own and cluster-wide resources, so it is never among them.
 */
/**
 * The nodes whose stored resources still link to another node's: the node the last change
 * added keeps its join (the seed it joined through, the node before it) until the next
 * change targets it (crossNodeResources). A program run outside a rollout (`pulumi preview`
 * by hand) registers these nodes' joins as stored, so it shows no change.
 */
export function nodesWithStoredJoins(resources: readonly StateResource[], nodeNames: readonly string[]): string[] {
  const owners = new Set(crossing(resources, nodeNames).map((urn) => ownerOf(urnName(urn), nodeNames)));
  return nodeNames.filter((n) => owners.has(n));
}

function crossing(resources: readonly StateResource[], nodeNames: readonly string[]): string[] {
  const real = resources.filter((r) => !ENGINE_OWNED(r));
  const owner = new Map(real.map((r) => [r.urn, ownerOf(urnName(r.urn), nodeNames)]));
  return real
    .filter((r) => {
      const mine = owner.get(r.urn);
      return mine !== undefined && refs(r).some((u) => owner.get(u) !== undefined && owner.get(u) !== mine);
    })
    .map((r) => r.urn);
}

export function crossNodeResources(resources: readonly StateResource[], nodeNames: readonly string[]): string[] {
  const real = resources.filter((r) => !ENGINE_OWNED(r));
  const found = crossing(real, nodeNames);
  return [...new Set([...found, ...dependentsOf(real, found)])].sort();
}

/**
 * Nodes the state holds resources of but the node list does not: a surge whose `up` failed
 * or was killed before the list was written. Found by the node components' type and by
 * molt's node names (`isNodeName`), so a cloud host key made before its component counts too.
 */
export function orphanedNodes(
  resources: readonly StateResource[],
  listed: readonly string[],
  isNodeName: (name: string) => boolean,
): string[] {
  const found = new Set<string>();
  for (const r of resources) {
    const name = urnName(r.urn);
    if (ownerOf(name, listed)) continue;
    if (/:ControlPlaneNode$/.test(r.type) || isNodeName(name)) found.add(name);
    else {
      const m = /^(.+)-[a-z]+$/.exec(name);
      if (m && isNodeName(m[1])) found.add(m[1]);
    }
  }
  return [...found].sort();
}
