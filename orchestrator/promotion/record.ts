// The verification record: what a stack's backend says about a release it ran. Written when
// a rollout converges (state "soaking"), advanced by the soak, "verified" once the soak has
// passed; removed when the cluster did not stay healthy. It lives in the stack's own backend
// (`.molt/verifications/<stack>/<release>.json`, next to `.pulumi/` and the lease), so every
// runner and every other stack's rollout reads the same record. Writes are conditional
// (orchestrator/backend/store.ts): a record is never overwritten on a version that was not read.
import { hostname } from "node:os";
import { z } from "zod";
import type { ObjectStore } from "../backend/object-store";
import { releaseSchema, type Release } from "./release";

export interface VerificationRecord {
  kind: "molt-verification";
  version: 1;
  stack: string;
  release: Release;
  /** releaseDigest(release) when the record was written: a record edited afterwards no longer matches. */
  digest: string;
  converged: {
    at: string;
    /** The rollout that converged: "succeeded" (it changed nodes) or "noop" (already there). */
    result: "succeeded" | "noop";
    operations: number;
    /** Failed operations of that run: always 0 (only a converged run writes a record). */
    failures: 0;
    wallMs: number;
    /** The nodes as the run last observed them. */
    nodes: { name: string; image: string; kubernetesVersion?: string }[];
  };
  soak: {
    minutes: number;
    startedAt: string;
    /** The last observation that found every gate healthy (a resumed soak continues from it). */
    lastHealthyAt: string;
    observations: number;
    result: "running" | "passed";
    passedAt?: string;
  };
  writtenAt: string;
  writtenBy: string;
}

export const recordSchema = z
  .object({
    kind: z.literal("molt-verification"),
    version: z.literal(1),
    stack: z.string(),
    release: releaseSchema,
    digest: z.string(),
    converged: z.object({
      at: z.string(),
      result: z.enum(["succeeded", "noop"]),
      operations: z.number(),
      failures: z.literal(0),
      wallMs: z.number(),
      nodes: z.array(
        z.object({ name: z.string(), image: z.string(), kubernetesVersion: z.string().optional() }).strict(),
      ),
    }),
    soak: z.object({
      minutes: z.number(),
      startedAt: z.string(),
      lastHealthyAt: z.string(),
      observations: z.number(),
      result: z.enum(["running", "passed"]),
      passedAt: z.string().optional(),
    }),
    writtenAt: z.string(),
    writtenBy: z.string(),
  })
  .strict();

export function recordKey(stack: string, release: string): string {
  return `.molt/verifications/${stack}/${release}.json`;
}

/** A record as stored, with the version to write over it. */
export interface StoredRecord {
  record: VerificationRecord;
  etag: string;
}

/** A record that is there but cannot be read as one: never treated as a verification. */
export class UnreadableRecordError extends Error {
  constructor(
    readonly where: string,
    detail: string,
    /** The version that holds it (a new convergence writes over it). */
    readonly etag: string,
  ) {
    super(`the verification record ${where} is not a record molt wrote (${detail})`);
    this.name = "UnreadableRecordError";
  }
}

export async function readRecord(
  store: ObjectStore,
  stack: string,
  release: string,
): Promise<StoredRecord | undefined> {
  const key = recordKey(stack, release);
  const o = await store.get(key);
  if (!o) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(o.body.toString("utf8"));
  } catch (e) {
    throw new UnreadableRecordError(`${store.location}/${key}`, `not JSON: ${(e as Error).message}`, o.etag);
  }
  const r = recordSchema.safeParse(doc);
  if (!r.success)
    throw new UnreadableRecordError(
      `${store.location}/${key}`,
      r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "),
      o.etag,
    );
  return { record: r.data as VerificationRecord, etag: o.etag };
}

/**
 * Writes `record` over version `etag` (undefined: only if there is none). False when
 * another writer got there first: the caller reads again.
 */
export async function writeRecord(
  store: ObjectStore,
  record: Omit<VerificationRecord, "writtenAt" | "writtenBy">,
  etag: string | undefined,
): Promise<string | undefined> {
  // A timestamp in every version: S3's ETag is the content's MD5, so no two writes are equal.
  const full: VerificationRecord = { ...record, writtenAt: new Date().toISOString(), writtenBy: hostname() };
  const body = Buffer.from(JSON.stringify(full, null, 2) + "\n");
  const key = recordKey(record.stack, record.release.name);
  return etag === undefined ? store.putIfAbsent(key, body) : store.putIfMatch(key, body, etag);
}

export async function deleteRecord(store: ObjectStore, stored: StoredRecord): Promise<boolean> {
  return store.delete(recordKey(stored.record.stack, stored.record.release.name), stored.etag);
}
