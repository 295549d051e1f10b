// The soak: after convergence the cluster must stay healthy - every gate molt checks, the
// planner with nothing to do - observed again and again for molt:promotion.soakMinutes. The
// record in the backend holds the soak's start and its last healthy observation, so an
// interrupted soak resumes (molt verify) where it was, if nobody missed much of it.
// One unhealthy observation ends the soak: the record is removed, and only a new converged
// rollout writes another. With a signing key the passed record is signed; a record that passed
// unsigned, under another key or shorter than the stack now asks, is soaked again (a signer
// vouches only for what it watched).
import { pause } from "../../lib/poll";
import type { ObjectStore } from "../backend/object-store";
import type { Edges } from "../core/edges";
import type { Intent } from "../core/model";
import { observe } from "../observe";
import type { PromotionEvent } from "./events";
import {
  contentOf,
  deleteRecord,
  recordBytes,
  writeRecord,
  type RecordContent,
  type StoredRecord,
  type VerificationRecord,
} from "./record";
import { resumeSoak, soakDone, soakIntervalMs, soakMaxGapMs, soakProblem } from "./rules";
import { parsePublicKey, signatureValid, type RecordSigner } from "./signing";

export type SoakResult =
  | { result: "passed"; record: VerificationRecord }
  | { result: "failed"; reason: string }
  | { result: "cancelled"; reason: string };

export interface SoakOptions {
  edges: Edges;
  intent: Intent;
  stack: string;
  store: ObjectStore;
  stored: StoredRecord;
  signal?: AbortSignal;
  emit: (e: PromotionEvent) => void;
  /** Between observations (default: soakIntervalMs of the soak's length). */
  intervalMs?: number;
  now?: () => number;
  /** Signs the record when the soak passes. */
  signer?: RecordSigner;
  /** molt:promotion.soakMinutes now: a soak recorded shorter is soaked again, this long. */
  minutes?: number;
}

/** Why a passed record is soaked again rather than taken as it is, or undefined. */
export function resoakReason(record: VerificationRecord, signer?: RecordSigner, minutes?: number): string | undefined {
  if (minutes !== undefined && record.soak.minutes < minutes)
    return `its soak lasted ${record.soak.minutes} min and the stack now asks for ${minutes}: it is soaked again`;
  if (!signer) return undefined;
  if (!record.signature)
    return `it passed unsigned; a signing key is given, and it signs only a soak it watched: it is soaked again`;
  if (!signatureValid(recordBytes(record), record.signature.value, parsePublicKey(signer.publicKey).key))
    return (
      `it is not signed with the given key (${signer.keyId}), which signs only a soak it watched: ` +
      `it is soaked again`
    );
  return undefined;
}

export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const now = o.now ?? Date.now;
  let { record, etag } = o.stored;
  const where = `${o.store.location}`;
  const base = { stack: o.stack, release: record.release.name };
  let fresh = record.soak.observations === 0;
  if (record.soak.result === "passed") {
    const again = resoakReason(record, o.signer, o.minutes);
    if (!again) return { result: "passed", record };
    o.emit({ type: "verification", ...base, digest: record.digest, where, state: "soaking", detail: again });
    fresh = true;
  }
  const minutes = Math.max(record.soak.minutes, o.minutes ?? 0);
  const soakMs = minutes * 60_000;
  const clock = fresh ? { startedAt: now(), resumed: false } : resumeSoak(record.soak, now(), soakMaxGapMs(minutes));
  let observations = clock.resumed ? record.soak.observations : 0;
  if ("restartReason" in clock && clock.restartReason)
    o.emit({
      type: "verification",
      ...base,
      digest: record.digest,
      where,
      state: "soaking",
      detail: clock.restartReason,
    });
  const interval = o.intervalMs ?? soakIntervalMs(minutes);
  for (;;) {
    if (o.signal?.aborted)
      return {
        result: "cancelled",
        reason:
          `cancelled during the soak of release ${record.release.name}; ` + `molt verify --stack ${o.stack} resumes it`,
      };
    const world = await observe(o.edges, o.intent, { expired: [] });
    const t = now();
    const problem = soakProblem(world, o.stack);
    observations++;
    o.emit({
      type: "soak",
      ...base,
      observation: observations,
      healthy: !problem,
      elapsedMs: t - clock.startedAt,
      soakMs,
      detail: problem ?? "every gate healthy, nothing to do",
    });
    if (problem) {
      const removed = await deleteRecord(o.store, { record, etag });
      const reason =
        `the cluster did not stay healthy during the soak of release ${record.release.name} ` +
        `(after ${Math.round((t - clock.startedAt) / 1000)}s of ${Math.round(soakMs / 1000)}s): ${problem}`;
      o.emit({
        type: "verification",
        ...base,
        digest: record.digest,
        where,
        state: "removed",
        detail: removed
          ? `${reason}; the record was removed: fix the cluster, run molt rollout --stack ${o.stack} ` +
            `(it records the convergence again), then molt verify --stack ${o.stack}`
          : `${reason}; the record had already been changed by another run and was left as it is`,
      });
      return { result: "failed", reason };
    }
    const done = soakDone(clock.startedAt, t, minutes, observations);
    const next: RecordContent = {
      ...contentOf(record),
      soak: {
        minutes,
        startedAt: new Date(clock.startedAt).toISOString(),
        lastHealthyAt: new Date(t).toISOString(),
        observations,
        result: done ? "passed" : "running",
        ...(done ? { passedAt: new Date(t).toISOString() } : {}),
      },
    };
    const written = await writeRecord(o.store, next, etag, o.signer);
    if (written === undefined)
      throw new Error(
        `the verification record of release ${record.release.name} on stack ${o.stack} was changed by another ` +
          `run during the soak; run molt verify --stack ${o.stack} again`,
      );
    ({ record, etag } = written);
    if (done) {
      o.emit({
        type: "verification",
        ...base,
        digest: record.digest,
        where,
        state: "verified",
        detail:
          `healthy in ${observations} observations over ${Math.round((t - clock.startedAt) / 1000)}s; ` +
          (record.signature ? `signed with key ${record.signature.keyId}` : "unsigned (no signing key was given)"),
      });
      return { result: "passed", record };
    }
    await pause(Math.min(interval, Math.max(0, clock.startedAt + soakMs - now())) || interval, o.signal);
  }
}
