// The verification record: what a stack's backend says about a release it ran. Written when
// a rollout converges (state "soaking"), advanced by the soak, "verified" once the soak has
// passed; removed when the cluster did not stay healthy. It lives in the stack's own backend
// (`.molt/verifications/<stack>/<release>.json`, next to `.pulumi/` and the lease), so every
// runner and every other stack's rollout reads the same record. Writes are conditional
// (orchestrator/backend/store.ts): a record is never overwritten on a version that was not read.
// Every field is covered: `recordDigest` is the sha256 of the record's canonical text
// (canonical.ts), and a record whose soak passed where a signing key was given carries an
// ed25519 signature over that same text (signing.ts).
import { createHash } from "node:crypto";
import { hostname } from "node:os";
import { z } from "zod";
import type { ObjectStore } from "../backend/object-store";
import { canonicalJson } from "./canonical";
import { releaseSchema, type Release } from "./release";
import type { RecordSigner } from "./signing";

export interface VerificationRecord {
  kind: "molt-verification";
  /** 2: `recordDigest` covers the whole record. 1 (older molt): only the release was covered; never accepted. */
  version: 1 | 2;
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
    /**
     * A chained release (molt:release.chain): each step of this stack's chain, and whether the
     * run that converged saw it converged with every gate holding before the next step began.
     */
    chain?: { minor: string; image: string; verified: boolean; kubernetesVersion?: string }[];
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
  /** sha256 of recordBytes(record): every field but this one and `signature`. */
  recordDigest?: string;
  /** The signing environment's signature over recordBytes(record), once the soak has passed. */
  signature?: RecordSignature;
}

export interface RecordSignature {
  algorithm: "ed25519";
  /** The signer's key as it names itself (SHA256:<base64 of its public key's DER>): a hint, not a proof. */
  keyId: string;
  /** base64. */
  value: string;
}

/** Fields the record's writer fills in (writeRecord). */
type Sealed = "version" | "writtenAt" | "writtenBy" | "recordDigest" | "signature";
export type RecordContent = Omit<VerificationRecord, Sealed>;

const isoTime = z.string().refine((v) => Number.isFinite(Date.parse(v)), "a time (ISO 8601)");
const count = z.number().int().min(0);

export const recordSchema = z
  .object({
    kind: z.literal("molt-verification"),
    version: z.union([z.literal(1), z.literal(2)]),
    stack: z.string(),
    release: releaseSchema,
    digest: z.string(),
    converged: z.object({
      at: isoTime,
      result: z.enum(["succeeded", "noop"]),
      operations: count,
      failures: z.literal(0),
      wallMs: count,
      nodes: z.array(
        z.object({ name: z.string(), image: z.string(), kubernetesVersion: z.string().optional() }).strict(),
      ),
      chain: z
        .array(
          z
            .object({
              minor: z.string(),
              image: z.string(),
              verified: z.boolean(),
              kubernetesVersion: z.string().optional(),
            })
            .strict(),
        )
        .optional(),
    }),
    soak: z.object({
      minutes: z.number().min(0),
      startedAt: isoTime,
      lastHealthyAt: isoTime,
      observations: count,
      result: z.enum(["running", "passed"]),
      passedAt: isoTime.optional(),
    }),
    writtenAt: isoTime,
    writtenBy: z.string(),
    recordDigest: z
      .string()
      .regex(/^sha256:[0-9a-f]{64}$/)
      .optional(),
    signature: z
      .object({ algorithm: z.literal("ed25519"), keyId: z.string(), value: z.string().regex(/^[A-Za-z0-9+/]+=*$/) })
      .strict()
      .optional(),
  })
  .strict();

/** What the digest and the signature cover: the record without them, as canonical JSON, with a purpose label. */
export function recordBytes(record: VerificationRecord): Buffer {
  const { recordDigest: _d, signature: _s, ...covered } = record;
  return Buffer.from("molt-verification-record\n" + canonicalJson(covered));
}

export function recordDigestOf(record: VerificationRecord): string {
  return "sha256:" + createHash("sha256").update(recordBytes(record)).digest("hex");
}

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
 * Writes `content` over version `etag` (undefined: only if there is none), with its digest,
 * and signed by `signer` when its soak has passed. The stored record, or undefined when
 * another writer got there first: the caller reads again.
 */
export async function writeRecord(
  store: ObjectStore,
  content: RecordContent,
  etag: string | undefined,
  signer?: RecordSigner,
): Promise<StoredRecord | undefined> {
  // A timestamp in every version: S3's ETag is the content's MD5, so no two writes are equal.
  const covered: VerificationRecord = {
    ...content,
    version: 2,
    writtenAt: new Date().toISOString(),
    writtenBy: hostname(),
  };
  const bytes = recordBytes(covered);
  const record: VerificationRecord = {
    ...covered,
    recordDigest: recordDigestOf(covered),
    ...(signer && content.soak.result === "passed"
      ? { signature: { algorithm: "ed25519" as const, keyId: signer.keyId, value: signer.sign(bytes) } }
      : {}),
  };
  const body = Buffer.from(JSON.stringify(record, null, 2) + "\n");
  const key = recordKey(content.stack, content.release.name);
  const written = etag === undefined ? await store.putIfAbsent(key, body) : await store.putIfMatch(key, body, etag);
  return written === undefined ? undefined : { record, etag: written };
}

/** The content of `record`, as writeRecord takes it (what a later write carries forward). */
export function contentOf(record: VerificationRecord): RecordContent {
  const { version: _v, writtenAt: _a, writtenBy: _b, recordDigest: _d, signature: _s, ...content } = record;
  return content;
}

export async function deleteRecord(store: ObjectStore, stored: StoredRecord): Promise<boolean> {
  return store.delete(recordKey(stored.record.stack, stored.record.release.name), stored.etag);
}
