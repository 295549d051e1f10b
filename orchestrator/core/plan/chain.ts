// Chained upgrades: a target more than one Kubernetes minor ahead of the cluster is reached
// one minor at a time, each step a full add-first roll to that minor's image (molt:images).
// The chain is derived on every pass from what the nodes run and the intent, never from the
// loop's memory, so a run killed anywhere resumes at the step the world is in.
import type { ChainImage, Intent, NodeEntry, World } from "../model";
import { compareVersions, etcdVersionProblem, fullVersionOf } from "./versions";
import { etcdUpgradePatchProblem } from "./etcd-upgrade";

export interface ChainStep extends ChainImage {
  /**
   * reached: every node runs this minor (its gates hold before the next step's first node);
   * left: some nodes still run it, the others run the next step's; rolling: the step being
   * rolled; next: the step that starts once the reached one holds; pending: later.
   */
  state: "reached" | "left" | "rolling" | "next" | "pending";
  /** The nodes that run this minor now. */
  nodes: string[];
}

export interface Chain {
  /** From the cluster's minor (when molt:images names it) to the target, one minor each. */
  steps: ChainStep[];
  /** The step being rolled, or next to roll (an index into steps). */
  current: number;
  /** The intent of that step: its image, version and etcd in place of the target's. */
  intent: Intent;
  /**
   * Every node runs the minor of an earlier step that molt:images names: that step's rollout
   * must have converged (all nodes on its image, healthy voters, kubeadm-config and addons on
   * its version, its soak) before the current step's first node joins.
   */
  settle?: { step: ChainStep; intent: Intent };
}

export type ChainResult = { kind: "none" } | { kind: "chain"; chain: Chain } | { kind: "refuse"; reason: string };

/**
 * The chain from the nodes' Kubernetes versions to the intent's, or "none" where the
 * ordinary rules decide alone (no molt:images, a new cluster, a target at most one minor
 * ahead with nothing to settle first, or a downgrade or another major: refused by them).
 * Refused up front, before any change: a minor on the way without an image, nodes two
 * minors apart, a step that would downgrade a node, and etcd versions between the steps that
 * etcd's own rules forbid (one minor a step, the patch floors).
 */
export function chainOf(nodes: NodeEntry[], intent: Intent): ChainResult {
  const target = fullVersionOf(intent.kubernetesVersion);
  if (!intent.chain?.length || !target || !intent.kubernetesVersion) return { kind: "none" };
  const running = nodes.flatMap((n) => {
    const v = fullVersionOf(n.kubernetesVersion);
    return v ? [{ name: n.name, version: n.kubernetesVersion!, v }] : [];
  });
  if (running.length === 0 || running.some((r) => r.v.major !== target.major || compareVersions(r.v, target) > 0))
    return { kind: "none" };
  const lo = Math.min(...running.map((r) => r.v.minor));
  const hi = Math.max(...running.map((r) => r.v.minor));
  const major = target.major;
  const minorName = (m: number) => `${major}.${m}`;
  const byMinor = new Map<number, ChainImage>();
  for (const c of intent.chain) {
    const v = fullVersionOf(c.kubernetesVersion);
    if (v && v.major === major && v.minor < target.minor) byMinor.set(v.minor, c);
  }
  const targetStep: ChainImage = {
    minor: minorName(target.minor),
    image: intent.image,
    kubernetesVersion: intent.kubernetesVersion,
    ...(intent.etcdVersion ? { etcdVersion: intent.etcdVersion } : {}),
  };
  const imageOf = (m: number) => (m === target.minor ? targetStep : byMinor.get(m));
  const settleFirst = hi === lo && lo < target.minor && byMinor.has(lo);
  if (target.minor - lo <= 1 && !settleFirst) return { kind: "none" };
  const on = (m: number) => running.filter((r) => r.v.minor === m);
  const list = (m: number) =>
    on(m)
      .map((r) => `${r.name} (${r.version})`)
      .join(", ");
  if (hi - lo > 1)
    return {
      kind: "refuse",
      reason:
        `the nodes run Kubernetes minors ${minorName(lo)} (${list(lo)}) and ${minorName(hi)} (${list(hi)}), more ` +
        `than one apart: no step of a chain can join them (one minor at a time); nothing was changed`,
    };
  const missing: string[] = [];
  for (let m = lo + 1; m < target.minor; m++) if (!byMinor.has(m)) missing.push(minorName(m));
  if (missing.length)
    return {
      kind: "refuse",
      reason:
        `molt:kubernetesVersion ${intent.kubernetesVersion} is ${target.minor - lo} minors ahead of the cluster ` +
        `(${list(lo)}): Kubernetes upgrades go one minor at a time, and molt:images names no image for ` +
        `${missing.join(", ")}. Add ${missing.map((m) => `"${m}": <its image>`).join(", ")} to molt:images, or ` +
        `set molt:kubernetesVersion to a ${minorName(lo + 1)} version first; nothing was changed`,
    };
  // Shown from the cluster's own minor when molt:images names it; walked from there only
  // when every node still runs it (its gates are checked first), else from the next minor.
  const first = byMinor.has(lo) ? lo : lo + 1;
  const walk = settleFirst ? lo : lo + 1;
  const images: ChainImage[] = [];
  for (let m = first; m <= target.minor; m++) images.push(imageOf(m)!);
  // A node newer than its minor's step would be replaced by an older node: a downgrade.
  for (const r of running) {
    const step = imageOf(r.v.minor);
    if (step && r.v.minor >= walk && compareVersions(r.v, fullVersionOf(step.kubernetesVersion)!) > 0)
      return {
        kind: "refuse",
        reason:
          `${r.name} runs Kubernetes ${r.version}, newer than the chain's ${step.minor} step ` +
          `(molt:images "${step.minor}": ${step.image}, Kubernetes ${step.kubernetesVersion}): the step would ` +
          `downgrade it. Name an image of ${r.version} or later for ${step.minor}; nothing was changed`,
      };
  }
  // etcd's rules between consecutive steps, checked before the first step starts.
  for (let i = walk - first + 1; i < images.length; i++) {
    const [a, b] = [images[i - 1], images[i]];
    if (!a.etcdVersion || !b.etcdVersion) continue;
    const problem =
      etcdVersionProblem([a.etcdVersion], b.etcdVersion) ??
      etcdUpgradePatchProblem([{ name: `the ${a.minor} step (${a.image})`, version: a.etcdVersion }], b.etcdVersion);
    if (problem)
      return {
        kind: "refuse",
        reason: `the chain's step ${a.minor} -> ${b.minor} breaks etcd's rules: ${problem}`,
      };
  }
  const current = hi > lo ? hi : lo + 1;
  const state = (m: number): ChainStep["state"] => {
    if (hi > lo) return m === lo ? "left" : m === hi ? "rolling" : "pending";
    return m === lo ? "reached" : m === lo + 1 ? "next" : "pending";
  };
  const steps: ChainStep[] = images.map((img, i) => ({
    ...img,
    state: state(first + i),
    nodes: on(first + i).map((r) => r.name),
  }));
  const index = current - first;
  return {
    kind: "chain",
    chain: {
      steps,
      current: index,
      intent: stepIntent(intent, steps[index]),
      ...(settleFirst ? { settle: { step: steps[0], intent: stepIntent(intent, steps[0]) } } : {}),
    },
  };
}

/** The intent of one step: its image, version and etcd in place of the target's. */
export function stepIntent(intent: Intent, step: ChainImage): Intent {
  const { chain: _chain, etcdVersion: _etcd, ...rest } = intent;
  return {
    ...rest,
    image: step.image,
    kubernetesVersion: step.kubernetesVersion,
    ...(step.etcdVersion ? { etcdVersion: step.etcdVersion } : {}),
  };
}

/**
 * The world as a reached step's gates see it: kubeadm-config already raised to the next
 * step's version (the next step's first change, before its first node joins) counts as
 * set, and is never lowered back.
 */
export function settledWorld(s: World, intent: Intent): World {
  const cc = s.kube?.clusterConfigVersion;
  const v = fullVersionOf(intent.kubernetesVersion);
  const p = fullVersionOf(cc);
  if (!s.kube || !v || !p || compareVersions(p, v) <= 0) return { ...s, intent };
  return { ...s, intent, kube: { ...s.kube, clusterConfigVersion: intent.kubernetesVersion } };
}

/** "1.35.4 -> 1.36.3 -> 1.37.2" */
export function chainPath(chain: Chain): string {
  return chain.steps.map((s) => s.kubernetesVersion).join(" -> ");
}
