// `molt verify --stack S`: runs, or resumes, the soak of the release S converged on. It holds
// the stack's lease while it watches (no rollout may change the cluster under a soak), never
// changes the cluster, and writes only the record.
import type { RolloutEvent } from "../events";
import { InvalidConfigError } from "../config";
import { openRun, type Run } from "../run/context";
import type { EdgeFactory } from "../edges/open";
import { PromotionRefusedError } from "./errors";
import type { VerifyEvent } from "./events";
import { readRecord, type VerificationRecord } from "./record";
import { releaseDigest } from "./release";
import { recordConsistencyProblem, recordIntegrityProblem, releaseIntentProblems } from "./rules";
import { unsignedNote } from "./hooks";
import { loadSigner } from "./signing";
import { resoakReason, runSoak } from "./soak";

export interface VerifyOptions {
  stack: string;
  workDir?: string;
  env?: Record<string, string>;
  signal?: AbortSignal;
  onEvent?: (e: VerifyEvent) => void;
  edges?: EdgeFactory;
  /** Between soak observations (default: from the soak's length, 1-30 s). */
  soakIntervalMs?: number;
  /** The ed25519 private key file that signs the record (default: $MOLT_SIGNING_KEY_FILE, then $MOLT_SIGNING_KEY). */
  signingKeyFile?: string;
}

export type VerifySummary = Extract<VerifyEvent, { type: "verify-summary" }>;

export async function verify(o: VerifyOptions): Promise<VerifySummary> {
  const t0 = Date.now();
  const emit = (e: VerifyEvent) => o.onEvent?.(e);
  // The rollouts' lease, wherever it lives (lease/hold.ts): beside the state, or in the cluster.
  const lockEvents = (e: RolloutEvent) => {
    // A lease that cannot be given up expires by itself after its time to live.
    if (e.type === "lock-release-failed")
      emit({ type: "warning", message: `giving the stack lock up failed: ${e.message}` });
  };
  const run = await openRun({ ...o, emit: lockEvents });
  try {
    return await verifyIn(o, run, emit, t0);
  } finally {
    await run.close();
  }
}

async function verifyIn(o: VerifyOptions, run: Run, emit: (e: VerifyEvent) => void, t0: number) {
  const { cfg } = run;
  const release = cfg.release;
  if (!release)
    throw new PromotionRefusedError(
      `stack ${o.stack} names no molt:release, so there is nothing to verify; nothing was changed. ` +
        `Declare the release in ${cfg.file} (see docs/staging.md).`,
    );
  const problems = releaseIntentProblems(release, cfg.intent, o.stack);
  if (problems.length) throw new InvalidConfigError(cfg.file, problems);
  // Read before anything else: a key that cannot sign refuses the run, not the end of a long soak.
  const signer = loadSigner({ file: o.signingKeyFile, env: { ...process.env, ...(o.env ?? {}) } });
  const store = run.requireStore("verification records");
  await store.check();
  const finish = (result: VerifySummary["result"], reason: string): VerifySummary => {
    const s: VerifySummary = {
      type: "verify-summary",
      stack: o.stack,
      release: release.name,
      result,
      reason,
      wallMs: Date.now() - t0,
    };
    emit(s);
    return s;
  };
  const first = await readRecord(store, o.stack, release.name);
  checkRecord(first?.record, o.stack, release.name, releaseDigest(release));
  const minutes = cfg.promotion.soakMinutes;
  if (first!.record.soak.result === "passed" && !resoakReason(first!.record, signer, minutes))
    return finish(
      "already-verified",
      `release ${release.name} passed its soak at ${first!.record.soak.passedAt} (` +
        `${first!.record.signature ? `signed with key ${first!.record.signature.keyId}` : "unsigned"})`,
    );

  const lock = await run.hold("verify");
  const signal = run.signal!;
  const edges = await run.open();
  // Read again under the lease: a rollout may have replaced the record in between.
  const stored = await readRecord(store, o.stack, release.name);
  checkRecord(stored?.record, o.stack, release.name, releaseDigest(release));
  const soak = await runSoak({
    edges,
    intent: cfg.intent,
    stack: o.stack,
    store,
    stored: stored!,
    signal,
    emit,
    minutes,
    ...(signer ? { signer } : {}),
    ...(o.soakIntervalMs !== undefined ? { intervalMs: o.soakIntervalMs } : {}),
  });
  if (soak.result === "passed") {
    if (!soak.record.signature) emit({ type: "warning", message: unsignedNote(o.stack) });
    return finish(
      "verified",
      `release ${release.name} stayed healthy on stack ${o.stack} for ${soak.record.soak.minutes} min ` +
        `(${soak.record.soak.observations} observations); ` +
        (soak.record.signature ? `signed with key ${soak.record.signature.keyId}` : "unsigned"),
    );
  }
  if (lock.signal.aborted) return finish("cancelled", `${(lock.signal.reason as Error)?.message ?? "lease lost"}`);
  return finish(soak.result === "failed" ? "soak-failed" : "cancelled", soak.reason);
}

function checkRecord(record: VerificationRecord | undefined, stack: string, release: string, digest: string): void {
  if (!record)
    throw new PromotionRefusedError(
      `release ${release} has not converged on stack ${stack} (no verification record); nothing was changed. ` +
        `Run molt rollout --stack ${stack} first: a converged rollout records it, then molt verify soaks it.`,
    );
  // A soak continues only a record molt wrote as it stands: an edited one is recorded again by a rollout.
  const broken = recordIntegrityProblem(record, stack) ?? recordConsistencyProblem(record, stack);
  if (broken) throw new PromotionRefusedError(`${broken}; nothing was changed`);
  if (record.digest !== digest)
    throw new PromotionRefusedError(
      `the record of release ${release} on stack ${stack} is of another release under the same name, or was altered; ` +
        `nothing was changed. Run molt rollout --stack ${stack}: ` +
        `a converged rollout records the release as configured.`,
    );
}
