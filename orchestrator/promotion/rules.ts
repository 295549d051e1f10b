// The promotion rules, as plain functions over plain data (records, releases, one observed
// world): what makes a record a valid verification (intact, consistent, this release, soaked,
// signed where a key is trusted), how a soak advances or resumes, what a release must agree
// with. The edges (stores, observation, files, keys on disk) are in the other modules.
import type { Intent, World } from "../core/model";
import { decide } from "../core/plan";
import { isHealthyNode, nodeViews } from "../views";
import { recordBytes, recordDigestOf, type VerificationRecord } from "./record";
import { releaseDigest, type Release } from "./release";
import { parsePublicKey, signatureValid } from "./signing";

/** What a stack that reads another stack's records trusts them for. */
export interface Trust {
  /** The ed25519 public key (base64 DER) the source's records must be signed with; none: unsigned is accepted. */
  publicKey?: string;
  /** The soak the source stack's config asks for, where it is known: a shorter soak does not count. */
  soakMinutes?: number;
}

/**
 * Why `record` (read from stack `source`) does not verify `release`, or undefined when it
 * does: the record is intact (its digest covers all of it), holds together (its nodes run the
 * release, its soak lasted its minutes with repeated observations), is about this very release
 * (same digest, not only the same name), has passed its soak, and - where `trust` names a
 * public key - is signed with that key.
 */
export function verificationProblem(
  record: VerificationRecord | undefined,
  release: Release,
  source: string,
  trust: Trust = {},
): string | undefined {
  if (!record)
    return (
      `release ${release.name} has no verification record on stack ${source}: ` +
      `roll ${source} to it and let it soak (molt rollout --stack ${source} --verify, or molt verify --stack ${source})`
    );
  const integrity = recordIntegrityProblem(record, source);
  if (integrity) return integrity;
  const wanted = releaseDigest(release);
  if (record.digest !== wanted)
    return (
      `stack ${source} verified a different release under the name ${release.name} ` +
      `(${describeRelease(record.release)}; this stack names ${describeRelease(release)})`
    );
  const inconsistent = recordConsistencyProblem(record, source);
  if (inconsistent) return inconsistent;
  if (record.soak.result !== "passed")
    return (
      `release ${release.name} converged on stack ${source} at ${record.converged.at} but its soak ` +
      `(${record.soak.minutes} min, started ${record.soak.startedAt}) has not finished: ` +
      `run molt verify --stack ${source}`
    );
  if (trust.soakMinutes !== undefined && record.soak.minutes < trust.soakMinutes)
    return (
      `release ${release.name} soaked ${record.soak.minutes} min on stack ${source}, but ${source}'s config asks for ` +
      `${trust.soakMinutes} (molt:promotion.soakMinutes): run molt verify --stack ${source} to soak it that long`
    );
  return signatureProblem(record, source, trust);
}

/**
 * Why `record` is not intact as molt wrote it for stack `source`, or undefined: written there
 * (not copied from another stack), by a molt whose digest covers the whole record, and not
 * edited since (the digests of the record and of its release recomputed).
 */
export function recordIntegrityProblem(record: VerificationRecord, source: string): string | undefined {
  const what = `the record of release ${record.release.name} on stack ${source}`;
  if (record.stack !== source) return `${what} names stack ${record.stack}: it was copied, not written there`;
  if (record.version !== 2 || record.recordDigest === undefined)
    return (
      `${what} was written by an older molt, whose digest covers only the release (not the convergence, the ` +
      `nodes or the soak); it is not accepted: ${recordAgain(source)}`
    );
  const recomputed = recordDigestOf(record);
  if (record.recordDigest !== recomputed)
    return (
      `${what} was altered after it was written (its digest ${short(record.recordDigest)} is not its content's ` +
      `${short(recomputed)}); it is not accepted: ${recordAgain(source)}`
    );
  const release = releaseDigest(record.release);
  if (record.digest !== release)
    return (
      `${what} was altered after it was written (its digest ${short(record.digest)} is not its release's ` +
      `${short(release)}); it is not accepted`
    );
  return undefined;
}

/**
 * Why `record` does not hold together, or undefined: every converged node runs the release's
 * image (and Kubernetes version) for `source`; the soak started after the convergence, a
 * passed soak lasted its minutes (end - start), ended on its last healthy observation, and
 * observed at least twice.
 */
export function recordConsistencyProblem(record: VerificationRecord, source: string): string | undefined {
  const problem = (what: string) =>
    `the record of release ${record.release.name} on stack ${source} does not hold together (${what}); ` +
    `it is not accepted: ${recordAgain(source)}`;
  const { converged, soak, release } = record;
  const image = release.images[source];
  if (image === undefined) return problem(`its release names no image for ${source}`);
  if (converged.nodes.length === 0) return problem("it converged on no nodes");
  const names = new Set(converged.nodes.map((n) => n.name));
  if (names.size !== converged.nodes.length) return problem("a node is listed twice");
  const version = (v: string | undefined) => v?.replace(/^v/, "");
  for (const n of converged.nodes) {
    if (n.image !== image) return problem(`node ${n.name} runs ${n.image}, not the release's image ${image}`);
    if (version(n.kubernetesVersion) !== version(release.kubernetesVersion))
      return problem(
        `node ${n.name} runs Kubernetes ${n.kubernetesVersion ?? "none"}, ` +
          `not the release's ${release.kubernetesVersion ?? "none"}`,
      );
  }
  const t = (v: string) => Date.parse(v);
  if (t(soak.startedAt) < t(converged.at))
    return problem(`its soak started at ${soak.startedAt}, before it converged at ${converged.at}`);
  if (t(soak.lastHealthyAt) < t(soak.startedAt))
    return problem(`its last healthy observation ${soak.lastHealthyAt} is before its soak started ${soak.startedAt}`);
  if (soak.result === "running")
    return soak.passedAt === undefined ? undefined : problem("a running soak has a passedAt");
  if (soak.passedAt === undefined) return problem("a passed soak without passedAt");
  if (soak.passedAt !== soak.lastHealthyAt)
    return problem(`its soak passed at ${soak.passedAt}, not on its last healthy observation ${soak.lastHealthyAt}`);
  const lasted = t(soak.passedAt) - t(soak.startedAt);
  if (lasted < soak.minutes * 60_000)
    return problem(
      `its soak passed ${(lasted / 60_000).toFixed(2)} min after it started, but a soak lasts ${soak.minutes} min`,
    );
  if (soak.observations < 2) return problem(`its soak passed on ${soak.observations} observation(s), not at least 2`);
  return undefined;
}

/** Why the signature of `record` does not satisfy `trust`, or undefined (also when no key is trusted). */
export function signatureProblem(record: VerificationRecord, source: string, trust: Trust): string | undefined {
  if (trust.publicKey === undefined) return undefined;
  const key = parsePublicKey(trust.publicKey);
  const what = `the record of release ${record.release.name} on stack ${source}`;
  const resoak =
    `soak it where the signing key is (molt verify --stack ${source} with --signing-key or ` + `MOLT_SIGNING_KEY_FILE)`;
  if (!record.signature)
    return (
      `${what} is not signed, and records of ${source} are trusted only when signed with key ${key.keyId} ` +
      `(molt:promotion.requireVerifiedOn publicKey): ${resoak}`
    );
  if (signatureValid(recordBytes(record), record.signature.value, key.key)) return undefined;
  if (record.signature.keyId !== key.keyId)
    return (
      `${what} is signed with another key (${record.signature.keyId}, as the record says), and records of ` +
      `${source} are trusted only when signed with key ${key.keyId}: ${resoak}, or correct publicKey`
    );
  return (
    `${what} has a signature that does not verify with the trusted key ${key.keyId}: it was altered after it ` +
    `was signed, or the signature belongs to another record; it is not accepted: ${resoak}`
  );
}

/** What to warn about a record accepted without a trusted key, or undefined when a key checked it. */
export function verificationWarning(record: VerificationRecord, source: string, trust: Trust): string | undefined {
  if (trust.publicKey !== undefined) return undefined;
  return record.signature
    ? `the record of ${record.release.name} on stack ${source} is signed with key ${record.signature.keyId}, but no ` +
        `publicKey is configured for ${source} (molt:promotion.requireVerifiedOn), so the signature was not checked`
    : `the record of ${record.release.name} on stack ${source} is not signed and no publicKey is configured for ` +
        `${source} (molt:promotion.requireVerifiedOn): anyone who can write ${source}'s backend can write a record ` +
        `that is accepted (docs/staging.md, "Signed records")`;
}

/** How a record is signed, for check lines and status. */
export function signatureDetail(record: VerificationRecord, trust: Trust): string {
  if (!record.signature) return "unsigned";
  return trust.publicKey !== undefined
    ? `signed with the trusted key ${record.signature.keyId}`
    : `signed with key ${record.signature.keyId} (not checked)`;
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

/** What records a release anew on `source`: a converged rollout writes a new record, its soak verifies it. */
const recordAgain = (source: string) =>
  `roll and soak ${source} again to record it anew (molt rollout --stack ${source} --verify)`;

const short = (d: string) => d.replace(/^sha256:/, "").slice(0, 12);
