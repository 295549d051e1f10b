// The planner: one observed world in, exactly one next operation out. Each step below is
// one family of rules, tried in order; the first that has something to say decides.
import type { Operation, World } from "../model";
import { grow, retire } from "./change-steps";
import { learners, leader, memberlessNode, replaceDeadGuard, strayMember, unhealthyVoters } from "./etcd-steps";
import { addons, kubernetesHealth } from "./kube-steps";
import { hookFailure, postJoinHook, postRetireHook, preRetireHook, replacementBoundary, soak } from "./control-steps";
import { newEntry } from "./rules";
import { ownership } from "./ownership";
import { withNextSurge } from "./overlap";
import { scopeOf, type Scope } from "./scope";
import { kubernetesVersionProblem } from "./versions";
import { vipCondition } from "./vip";
import { chainOf, chainPath, settledWorld, type Chain, type ChainStep } from "./chain";
import { endpointHealth, unfinishedRollback } from "./endpoint";
import { clusterVersionSettled } from "./cluster-version";

type Step = (c: Scope) => Operation | undefined;

export function decide(s: World, stack: string): Operation {
  const chain = chainOf(s.nodes, s.intent);
  if (chain.kind === "none") return decideStep(s, stack);
  if (chain.kind === "refuse")
    return (
      cleanUpFailedSurge(s, stack) ?? { kind: "refuse", condition: "KubernetesVersionChain", reason: chain.reason }
    );
  // A chained upgrade (plan/chain.ts): the step the world is in decides, as an ordinary rollout to it.
  const c = chain.chain;
  if (c.settle) {
    // Every node runs an earlier step's minor: that step converges (and soaks) first.
    const op = decideStep(settledWorld(s, c.settle.intent), stack);
    if (op.kind !== "done" || s.rollingBack) return inStep(op, c, c.settle.step);
    const soak = stepSoak(s, c.settle.step, c.steps[c.current]);
    if (soak) return inStep(soak, c, c.settle.step);
  }
  return inStep(decideStep({ ...s, intent: c.intent }, stack), c, c.steps[c.current]);
}

/**
 * The chain's step every node reached whose gates hold now (a converged rollout to it, its
 * soak passed): verified, the next step may start. Undefined outside a chain or before then.
 */
export function passedStep(s: World, stack: string): ChainStep | undefined {
  const chain = chainOf(s.nodes, s.intent);
  const settle = chain.kind === "chain" ? chain.chain.settle : undefined;
  if (!settle || s.rollingBack) return undefined;
  if (decideStep(settledWorld(s, settle.intent), stack).kind !== "done") return undefined;
  const soak = s.intent.timeouts.stepSoakSeconds ?? 0;
  return soak > 0 && !s.expired.includes(`step-soak:${settle.step.minor}`) ? undefined : settle.step;
}

/** The operation's reason, saying which step of the chain it serves. */
function inStep(op: Operation, c: Chain, step: ChainStep): Operation {
  const n = c.steps.indexOf(step) + 1;
  return {
    ...op,
    reason: `chain ${chainPath(c)}, step ${n}/${c.steps.length} (${step.kubernetesVersion}): ${op.reason}`,
  };
}

/** molt:rollout.stepSoakSeconds: the converged step observed before the next step's first node joins. */
function stepSoak(s: World, reached: ChainStep, next: ChainStep): Operation | undefined {
  const seconds = s.intent.timeouts.stepSoakSeconds ?? 0;
  const key = `step-soak:${reached.minor}` as const;
  if (seconds <= 0 || s.expired.includes(key)) return undefined;
  return {
    kind: "wait",
    key,
    reason:
      `soaking the cluster on ${reached.kubernetesVersion}: every node converged, observed for ${seconds}s ` +
      `before ${next.kubernetesVersion}'s first node joins`,
  };
}

/** One rollout to `s.intent` (in a chain: to the current step's). */
function decideStep(s: World, stack: string): Operation {
  const early = cleanUpFailedSurge(s, stack) ?? firstNode(s, stack) ?? preflight(s);
  if (early) return early;
  const c = scopeOf(s, stack);
  const steps: Step[] = [
    // One stack owns the cluster: another's marker stops everything below (its members are
    // strays to this stack); none is claimed first.
    ownership,
    replaceDeadGuard,
    hookFailure,
    strayMember,
    postRetireHook,
    memberlessNode,
    // A rollback a kill interrupted after its new node left the load balancer goes on.
    unfinishedRollback,
    learners,
    unhealthyVoters,
    leader,
    kubernetesHealth,
    // The API endpoint: with a VIP, exactly one node holds it before anything changes.
    (c) => vipCondition(c.s),
    // The API load balancer: every node that stays is healthy in it (a new one counts in only then).
    endpointHealth,
    // Operator controls (plan/control-steps.ts): a new node is checked and soaked, the run may
    // stop at a replacement boundary, and the node to retire gets its hook first.
    postJoinHook,
    soak,
    replacementBoundary,
    preRetireHook,
    retire,
    grow,
    addons,
    // etcd's cluster version has caught up with the members: what the next minor joins onto.
    clusterVersionSettled,
  ];
  for (const step of steps) {
    const op = step(c);
    // molt:rollout.pruneWithNextSurge: a prune and the surge decided right after it, as one (plan/overlap.ts).
    if (op) return withNextSurge(s, op, (after) => decideStep(after, stack)) ?? op;
  }
  const { intent } = s;
  return {
    kind: "done",
    reason:
      `${s.nodes.length} nodes on ` +
      `${intent.image}${intent.kubernetesVersion ? ` / Kubernetes ${intent.kubernetesVersion}` : ""}, all healthy ` +
      `voters`,
  };
}

/** What a failed or killed surge left: resources of an unlisted node, or a rolled-back node already gone. */
function cleanUpFailedSurge(s: World, stack: string): Operation | undefined {
  if (s.orphans.length > 0) {
    return {
      kind: "prune-orphans",
      nodes: s.orphans,
      reason:
        `the state holds resources of ${s.orphans.join(", ")}, which are not in the node list (a surge ` +
        `that failed or was killed, or a retired node a prune-and-surge did not finish): destroy them`,
    };
  }
  const rb = s.rollingBack;
  if (rb && !s.nodes.some((n) => n.name === rb.node) && !retiredNodeLeft(s, stack)) {
    // The stack's first node has no old nodes beside it: its rollback leaves the stack empty.
    const others =
      s.nodes.length > 0
        ? "the old nodes were left untouched"
        : "it was the stack's first node, so the stack has no node now; run molt again to create the cluster anew";
    return {
      kind: "done",
      reason: rb.why
        ? `new node ${rb.node} could not be created (${rb.why}); ${others}`
        : `new node ${rb.node} was rolled back (removed); ${others}`,
    };
  }
  return undefined;
}

/**
 * A node without a member is still in the list (with more than one node): a failed
 * `prune-and-surge` left the retired node it never reached. It is destroyed before the run
 * ends as rolled back, as it would have been before a separate surge.
 */
function retiredNodeLeft(s: World, stack: string): boolean {
  if (!s.etcd || s.nodes.length < 2) return false;
  const c = scopeOf(s, stack);
  return s.nodes.some((n) => !c.memberOf(n));
}

function firstNode(s: World, stack: string): Operation | undefined {
  if (s.nodes.length > 0) return undefined;
  return {
    kind: "create-first",
    entry: newEntry(s, stack, true),
    reason: "the stack has no control-plane node: initialise a new cluster",
  };
}

function preflight(s: World): Operation | undefined {
  const skew = kubernetesVersionProblem(s.nodes, s.intent.kubernetesVersion);
  if (skew) return { kind: "refuse", condition: "KubernetesVersionSkew", reason: skew };
  if (!s.etcd) {
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `etcd cannot be observed: ${s.etcdError ?? "unknown"}`,
    };
  }
  if (s.intent.encryptionAtRest && s.kube && s.kube.encryptionProviderConfig === undefined) {
    return {
      kind: "refuse",
      condition: "EncryptionAtRest",
      reason:
        "molt:encryptionAtRest is set but this cluster's kubeadm-config has no --encryption-provider-config: molt " +
        "turns encryption on when it creates a cluster, and does not migrate a running one (a key on every node, " +
        "the API servers restarted with it, every Secret rewritten). Remove the key, or encrypt the cluster first; " +
        "nothing was changed",
    };
  }
  if (s.etcd.alarms.length > 0) {
    const alarms = s.etcd.alarms.map((a) => `${a.alarm} on member ${a.memberId}`).join(", ");
    return {
      kind: "refuse",
      condition: "EtcdClusterHealthy",
      reason: `etcd has active alarms: ${alarms}; resolve them (e.g. compact + defragment + disarm NOSPACE) first`,
    };
  }
  return undefined;
}
