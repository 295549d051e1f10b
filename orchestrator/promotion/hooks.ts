// The rollout's two calls into promotion (orchestrator/rollout.ts):
//  - releasePreflight, before the lease is taken: the release agrees with the stack's intent,
//    and (molt:promotion.requireVerifiedOn) every named stack holds a valid verification
//    record of exactly this release; else the run is refused, nothing changed;
//  - releaseRecorder(...).settle, when the loop ends converged: the record of the release is
//    written to the stack's backend (soaking), and with `verify` the soak runs inline.
import type { StackConfig } from "../config";
import { InvalidConfigError } from "../config";
import type { ObjectStore } from "../backend/object-store";
import { redactUrl, STORE_SCHEMES } from "../backend/store";
import type { Edges } from "../core/edges";
import type { RolloutEvent } from "../events";
import type { Stop } from "../core/memory";
import { PromotionRefusedError } from "./errors";
import { readRecord, UnreadableRecordError, writeRecord, type StoredRecord, type VerificationRecord } from "./record";
import { releaseDigest, type Release } from "./release";
import {
  describeRelease,
  recordConsistencyProblem,
  recordIntegrityProblem,
  releaseIntentProblems,
  signatureDetail,
  verificationProblem,
  verificationWarning,
  type Trust,
} from "./rules";
import { loadSigner, SigningKeyError, type RecordSigner } from "./signing";
import { runSoak } from "./soak";
import { configuredSoakMinutes, readSourceRecord } from "./source";

const optional = <K extends string, V>(k: K, v: V | undefined) => (v === undefined ? {} : { [k]: v });

export interface PromotionContext {
  cfg: StackConfig;
  stack: string;
  /** The project (stacks/): where the required stacks' own soakMinutes are read, when their configs are there. */
  workDir?: string;
  /** This stack's backend URL. */
  backend: string;
  /** Its object store (backend/store.ts openStore), undefined where molt has none. */
  store: ObjectStore | undefined;
  env?: Record<string, string>;
  emit: (e: RolloutEvent) => void;
}

/** Refuses (InvalidConfigError, PromotionRefusedError: exit 2) a run whose release may not roll here. */
export async function releasePreflight(c: PromotionContext & { verify?: boolean }): Promise<void> {
  const { cfg, stack } = c;
  const release = cfg.release;
  // --verify must never pass silently: without a release or a backend for records there is nothing to soak.
  if (c.verify && !release)
    throw new PromotionRefusedError(
      `--verify: stack ${stack} names no molt:release, so there is nothing to verify; nothing was changed. ` +
        `Declare the release in ${cfg.file}, or run without --verify.`,
    );
  if (c.verify && !c.store)
    throw new PromotionRefusedError(
      `--verify: molt keeps verification records in ${STORE_SCHEMES} backends only, and stack ${stack}'s is ` +
        `${redactUrl(c.backend)}; nothing was changed`,
    );
  if (release) {
    const problems = releaseIntentProblems(release, cfg.intent, stack);
    if (problems.length) throw new InvalidConfigError(cfg.file, problems);
  }
  const sources = cfg.promotion.requireVerifiedOn;
  if (sources.length === 0) return;
  if (!release)
    throw new PromotionRefusedError(
      `stack ${stack} rolls only releases verified on ${sources.map((s) => s.stack).join(", ")} ` +
        `(molt:promotion.requireVerifiedOn), but its config names no molt:release; nothing was changed. ` +
        `Write it with molt promote --from ${sources[0].stack} --to ${stack}.`,
    );
  const warnings: string[] = [];
  const results = await Promise.all(
    sources.map(async (s) => {
      const url = s.backend ?? c.backend;
      const where = redactUrl(url);
      const origin = s.backend
        ? `molt:promotion.requireVerifiedOn in ${cfg.file}`
        : `stack ${stack}'s own backend: molt:promotion.requireVerifiedOn in ${cfg.file} names none for ` + s.stack;
      const trust: Trust = {
        ...(s.publicKey ? { publicKey: s.publicKey } : {}),
        ...(c.workDir ? optional("soakMinutes", configuredSoakMinutes(c.workDir, s.stack)) : {}),
      };
      try {
        const stored = await readSourceRecord({ url, origin }, s.stack, release.name, c.env);
        const problem = verificationProblem(stored?.record, release, s.stack, trust);
        if (problem) return { stack: s.stack, where, verified: false, detail: problem };
        const r = stored!.record;
        const warning = verificationWarning(r, s.stack, trust);
        if (warning) warnings.push(warning);
        return {
          stack: s.stack,
          where,
          verified: true,
          detail:
            `verified: converged ${r.converged.at}, soaked ${r.soak.minutes} min until ${r.soak.passedAt}, ` +
            signatureDetail(r, trust),
        };
      } catch (e) {
        return { stack: s.stack, where, verified: false, detail: (e as Error).message };
      }
    }),
  );
  for (const message of warnings) c.emit({ type: "warning", message });
  c.emit({ type: "release-check", stack, release: release.name, digest: releaseDigest(release), sources: results });
  const missing = results.filter((r) => !r.verified);
  if (missing.length)
    throw new PromotionRefusedError(
      `rollout of stack ${stack} to release ${describeRelease(release)} refused: molt:promotion.requireVerifiedOn ` +
        `needs a valid verification on ${sources.map((s) => s.stack).join(", ")}; nothing was changed.\n` +
        missing.map((m) => `  - ${m.stack} (${m.where}): ${m.detail}`).join("\n"),
    );
}

export interface ConvergedRun {
  edges: Edges;
  /** The nodes as the run last observed them. */
  nodes: { name: string; image: string; kubernetesVersion?: string }[];
  operations: number;
  signal?: AbortSignal;
  /** A chained upgrade's steps this run saw converged with every gate holding (core/plan passedStep). */
  stepsVerified?: { kubernetesVersion: string; image: string }[];
}

/**
 * Writes the verification record when a run converges on a stack with a release (and, with
 * `verify`, soaks inline). Returns the run's end, changed only when recording or the soak failed.
 */
export function releaseRecorder(
  c: PromotionContext & { verify?: boolean; soakIntervalMs?: number; signingKeyFile?: string },
) {
  const startedAt = Date.now();
  // The key is read now, before the lease: a key that cannot sign refuses the run unchanged.
  if (c.signingKeyFile !== undefined && !c.verify)
    throw new SigningKeyError(
      `--signing-key signs the record of a soak: give it with --verify, or to molt verify --stack ${c.stack}`,
    );
  const signer: RecordSigner | undefined =
    c.verify && c.cfg.release
      ? loadSigner({ file: c.signingKeyFile, env: { ...process.env, ...(c.env ?? {}) } })
      : undefined;
  return {
    async settle(end: Stop, run: ConvergedRun): Promise<Stop> {
      const release = c.cfg.release;
      if (!release || (end.result !== "succeeded" && end.result !== "noop")) return end;
      const store = c.store;
      if (!store) {
        c.emit({
          type: "warning",
          message:
            `no verification record of release ${release.name}: molt keeps records in ${STORE_SCHEMES} backends ` +
            `only, and this stack's is ${redactUrl(c.backend)}`,
        });
        return c.verify ? { result: "failed", reason: "converged, but no record can be kept in this backend" } : end;
      }
      try {
        const current = await currentRecord(store, c.stack, release.name);
        let stored = current.stored;
        const digest = releaseDigest(release);
        // A record edited since it was written, or one that does not hold together, is replaced,
        // as one that cannot be read is.
        const broken =
          stored &&
          (recordIntegrityProblem(stored.record, c.stack) ?? recordConsistencyProblem(stored.record, c.stack));
        const same = stored && !broken && stored.record.digest === digest;
        const where = store.location;
        if (same) {
          c.emit({
            type: "verification",
            stack: c.stack,
            release: release.name,
            digest,
            where,
            state: "kept",
            detail:
              stored!.record.soak.result === "passed"
                ? `already verified (soak passed ${stored!.record.soak.passedAt})`
                : `converged ${stored!.record.converged.at}, soak running since ${stored!.record.soak.startedAt}`,
          });
        } else {
          const now = new Date().toISOString();
          const record = {
            kind: "molt-verification" as const,
            stack: c.stack,
            release,
            digest,
            converged: {
              at: now,
              result: end.result as "succeeded" | "noop",
              operations: run.operations,
              failures: 0 as const,
              wallMs: Date.now() - startedAt,
              nodes: run.nodes.map((n) => ({
                name: n.name,
                image: n.image,
                ...(n.kubernetesVersion ? { kubernetesVersion: n.kubernetesVersion } : {}),
              })),
              ...chainSteps(release, c.stack, run.stepsVerified ?? []),
            },
            soak: {
              minutes: c.cfg.promotion.soakMinutes,
              startedAt: now,
              lastHealthyAt: now,
              observations: 0,
              result: "running" as const,
            },
          };
          const written = await writeRecord(store, record, current.etag);
          if (written === undefined)
            return {
              result: "failed",
              reason:
                `converged on release ${release.name}, but its verification record was changed by another run ` +
                `while this one wrote it; rerun molt rollout --stack ${c.stack}`,
            };
          stored = written;
          c.emit({
            type: "verification",
            stack: c.stack,
            release: release.name,
            digest,
            where,
            state: "soaking",
            detail:
              `converged (${run.operations} operation(s), none failed); soak of ${c.cfg.promotion.soakMinutes} min ` +
              (c.verify ? "starts now" : `to run: molt verify --stack ${c.stack}`) +
              (broken ? `; the record there was replaced: ${broken}` : ""),
          });
        }
        if (!c.verify) return end;
        const soak = await runSoak({
          edges: run.edges,
          intent: c.cfg.intent,
          stack: c.stack,
          store,
          stored: stored!,
          emit: c.emit,
          minutes: c.cfg.promotion.soakMinutes,
          ...(signer ? { signer } : {}),
          ...(run.signal ? { signal: run.signal } : {}),
          ...(c.soakIntervalMs !== undefined ? { intervalMs: c.soakIntervalMs } : {}),
        });
        if (soak.result === "passed") {
          if (!soak.record.signature) c.emit({ type: "warning", message: unsignedNote(c.stack) });
          return end;
        }
        if (soak.result === "cancelled") return { result: "cancelled", reason: soak.reason };
        return {
          result: "failed",
          reason:
            `converged on release ${release.name}, but ${soak.reason}; no verification record is left: ` +
            `fix the cluster, then molt rollout --stack ${c.stack} --verify`,
        };
      } catch (e) {
        return {
          result: "failed",
          reason:
            `converged on release ${release.name}, but its verification record could not be written or read ` +
            `(${(e as Error).message.split("\n")[0]}); rerun molt rollout --stack ${c.stack}`,
        };
      }
    },
  };
}

/** Said when a soak passes without a signing key. */
export function unsignedNote(stack: string): string {
  return (
    `the verification record of stack ${stack} is not signed (no --signing-key, MOLT_SIGNING_KEY_FILE or ` +
    `MOLT_SIGNING_KEY): a stack that names a publicKey for ${stack} will not accept it ` +
    `(docs/staging.md, "Signed records")`
  );
}

/** The stored record and its version; one that cannot be read is replaced by a new convergence. */
async function currentRecord(
  store: ObjectStore,
  stack: string,
  release: string,
): Promise<{ stored?: StoredRecord; etag?: string }> {
  try {
    const stored = await readRecord(store, stack, release);
    return stored ? { stored, etag: stored.etag } : {};
  } catch (e) {
    if (e instanceof UnreadableRecordError) return { etag: e.etag };
    throw e;
  }
}

/**
 * A chained release's steps for this stack, each with whether this run verified it: saw every
 * node on it with every gate of a converged rollout holding (and its step soak passed) before
 * the next step started. A step walked by an earlier, interrupted run is not vouched for. The
 * target is the record's own release, verified by the convergence and the soak.
 */
function chainSteps(
  release: Release,
  stack: string,
  verified: { kubernetesVersion: string; image: string }[],
): { chain?: VerificationRecord["converged"]["chain"] } {
  const steps = Object.entries(release.chain ?? {}).flatMap(([minor, st]) =>
    st.images[stack] !== undefined ? [{ minor, image: st.images[stack] }] : [],
  );
  if (!steps.length) return {};
  return {
    chain: steps.map((st) => {
      const v = verified.find((x) => x.image === st.image && x.kubernetesVersion.startsWith(`${st.minor}.`));
      return {
        minor: st.minor,
        image: st.image,
        verified: v !== undefined,
        ...(v ? { kubernetesVersion: v.kubernetesVersion } : {}),
      };
    }),
  };
}
