// The promotion rules, as plain functions over plain data (records, releases, one observed
// world): what makes a record a valid verification, how a soak advances or resumes, what a
// release must agree with. The edges (stores, observation, files) are in the other modules.
import type { Intent, World } from "../core/model";
import { decide } from "../core/plan";
import { isHealthyNode, nodeViews } from "../views";
import type { VerificationRecord } from "./record";
import { releaseDigest, type Release } from "./release";

/**
 * Why `record` (read from stack `source`) does not verify `release`, or undefined when it
 * does: the record must be intact (its digest is its release's), be about this very release
 * (same digest, not only the same name), and have passed its soak.
 */
export function verificationProblem(
  record: VerificationRecord | undefined,
  release: Release,
  source: string,
): string | undefined {
  if (!record)
    return (
      `release ${release.name} has no verification record on stack ${source}: ` +
      `roll ${source} to it and let it soak (molt rollout --stack ${source} --verify, or molt verify --stack ${source})`
    );
  if (record.stack !== source)
    return (
      `the record of release ${release.name} on stack ${source} names stack ${record.stack}: ` +
      `it was copied, not written there`
    );
  const recomputed = releaseDigest(record.release);
  if (record.digest !== recomputed)
    return (
      `the record of release ${release.name} on stack ${source} was altered after it was written ` +
      `(its digest ${short(record.digest)} is not its release's ${short(recomputed)}); it is not accepted`
    );
  const wanted = releaseDigest(release);
  if (recomputed !== wanted)
    return (
      `stack ${source} verified a different release under the name ${release.name} ` +
      `(${describeRelease(record.release)}; this stack names ${describeRelease(release)})`
    );
  if (record.soak.result !== "passed")
    return (
      `release ${release.name} converged on stack ${source} at ${record.converged.at} but its soak ` +
      `(${record.soak.minutes} min, started ${record.soak.startedAt}) has not finished: ` +
      `run molt verify --stack ${source}`
    );
  return undefined;
}

/** Why the cluster in `world` is not healthy for a soak, or undefined when every gate holds. */
export function soakProblem(world: World, stack: string): string | undefined {
  const { intent } = world;
  if (world.nodes.length === 0) return "the stack has no nodes";
  if (!world.etcd) return `etcd cannot be observed: ${world.etcdError ?? "unknown"}`;
  if (intent.kubernetesVersion !== undefined && !world.kube)
    return `Kubernetes cannot be observed: ${world.kubeError ?? "unknown"}`;
  const views = nodeViews(world);
  const unhealthy = views.filter((v) => !isHealthyNode(views, v.name, intent.kubernetesVersion !== undefined));
  if (unhealthy.length)
    return `not a healthy voter${intent.kubernetesVersion ? " with a healthy control plane" : ""}: ${unhealthy
      .map((v) => v.name)
      .join(", ")}`;
  if (world.etcd.alarms.length) return `etcd alarms: ${world.etcd.alarms.map((a) => a.alarm).join(", ")}`;
  const outdated = views.filter((v) => v.outdated);
  if (outdated.length) return `not on the release: ${outdated.map((v) => `${v.name} (${v.image})`).join(", ")}`;
  if (world.nodes.length !== intent.replicas) return `${world.nodes.length} nodes, ${intent.replicas} wanted`;
  const next = decide(world, stack);
  if (next.kind !== "done") return `the planner has something to do: ${next.kind}: ${next.reason}`;
  return undefined;
}

export interface SoakClock {
  /** When the soak (re)starts counting, ms since the epoch. */
  startedAt: number;
  /** Soak time already counted, when resumed. */
  resumed: boolean;
  /** Why it starts over, when a record's soak is not continued. */
  restartReason?: string;
}

/**
 * Where a soak stands when `molt verify` (or a rollout) takes it up at `now`: a running soak
 * continues from its start if it was last seen healthy no more than `maxGapMs` ago (a
 * verify that was interrupted and rerun at once); an older one starts over, since nobody
 * watched the cluster in between.
 */
export function resumeSoak(soak: VerificationRecord["soak"], now: number, maxGapMs: number): SoakClock {
  const last = Date.parse(soak.lastHealthyAt);
  const gap = now - last;
  if (Number.isFinite(last) && gap >= 0 && gap <= maxGapMs)
    return { startedAt: Date.parse(soak.startedAt), resumed: true };
  return {
    startedAt: now,
    resumed: false,
    restartReason: `the cluster was last observed healthy ${Math.round(gap / 1000)}s ago (more than ${Math.round(
      maxGapMs / 1000,
    )}s): nobody watched it in between, so the soak starts over`,
  };
}

/** How often a soak observes: 20 times over its length, at least every 30 s, at most every second. */
export function soakIntervalMs(minutes: number): number {
  return Math.min(30_000, Math.max(1_000, (minutes * 60_000) / 20));
}

/** A running soak whose last healthy observation is older than this has not been watched: it restarts. */
export function soakMaxGapMs(minutes: number): number {
  return Math.max(60_000, 3 * soakIntervalMs(minutes));
}

/** Has a soak that started at `startedAt` lasted long enough at `now` (with at least two observations)? */
export function soakDone(startedAt: number, now: number, minutes: number, observations: number): boolean {
  return now - startedAt >= minutes * 60_000 && observations >= 2;
}

/**
 * What the release says and what the stack's intent runs must agree (lab images carry their
 * Kubernetes and etcd versions; on clouds the release's etcd version is declarative).
 */
export function releaseIntentProblems(release: Release, intent: Intent, stack: string): string[] {
  const p: string[] = [];
  const image = release.images[stack];
  if (image !== undefined && image !== intent.image)
    p.push(`molt:release.images.${stack}: ${image} is not molt:image (${intent.image})`);
  if (release.kubernetesVersion !== intent.kubernetesVersion)
    p.push(
      intent.kubernetesVersion === undefined
        ? `molt:release.kubernetesVersion: ${release.kubernetesVersion} but the stack runs no Kubernetes ` +
            `(its image ${intent.image} is etcd only); remove it`
        : `molt:release.kubernetesVersion: ${release.kubernetesVersion ?? "missing"}, but the stack runs ` +
            `Kubernetes ${intent.kubernetesVersion}; write ${intent.kubernetesVersion}`,
    );
  if (release.etcdVersion && intent.etcdVersion && release.etcdVersion !== intent.etcdVersion)
    p.push(
      `molt:release.etcdVersion: ${release.etcdVersion}, but image ${intent.image} carries etcd ${intent.etcdVersion}`,
    );
  return p;
}

/** Why release `release` cannot be promoted to stack `target`, or undefined. */
export function promotionTargetProblem(release: Release, from: string, target: string): string | undefined {
  if (from === target) return `--from and --to are both ${from}: promote from one stack to another`;
  if (release.images[target] === undefined)
    return (
      `release ${release.name} names no image for stack ${target} (images for: ` +
      `${Object.keys(release.images).join(", ")}); add "${target}: <image as ${target} names it>" to ` +
      `molt:release.images in ${from}'s config, roll and verify ${from} again`
    );
  return undefined;
}

export function describeRelease(r: Release): string {
  return [
    r.name,
    r.kubernetesVersion ? `Kubernetes ${r.kubernetesVersion}` : undefined,
    r.etcdVersion ? `etcd ${r.etcdVersion}` : undefined,
    `images ${Object.entries(r.images)
      .map(([s, i]) => `${s}=${i}`)
      .join(",")}`,
  ]
    .filter(Boolean)
    .join(", ");
}

const short = (d: string) => d.replace(/^sha256:/, "").slice(0, 12);
