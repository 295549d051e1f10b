// What `molt status` says about a stack's release: its name and digest, and where its
// verification record stands. Reading a record never fails the status: a backend without
// records, or an unreadable record, is said as such.
import type { ObjectStore } from "../backend/object-store";
import { redactUrl, STORE_SCHEMES } from "../backend/store";
import type { StackConfig } from "../config";
import { readRecord, type VerificationRecord } from "./record";
import { releaseDigest } from "./release";
import { describeRelease, recordIntegrityProblem, verificationProblem } from "./rules";

export interface ReleaseStatus {
  name: string;
  digest: string;
  description: string;
  verification: {
    state: "verified" | "soaking" | "none" | "invalid" | "unavailable";
    detail: string;
    convergedAt?: string;
    soakStartedAt?: string;
    soakPassedAt?: string;
  };
  requireVerifiedOn: string[];
}

export async function releaseStatus(
  cfg: StackConfig,
  stack: string,
  backend: string,
  store: ObjectStore | undefined,
): Promise<ReleaseStatus | undefined> {
  const release = cfg.release;
  if (!release) return undefined;
  const base = {
    name: release.name,
    digest: releaseDigest(release),
    description: describeRelease(release),
    requireVerifiedOn: cfg.promotion.requireVerifiedOn.map((s) => s.stack),
  };
  if (!store)
    return {
      ...base,
      verification: { state: "unavailable", detail: `no records in ${redactUrl(backend)} (${STORE_SCHEMES} only)` },
    };
  try {
    const stored = await readRecord(store, stack, release.name);
    if (!stored) return { ...base, verification: { state: "none", detail: "not converged since it was configured" } };
    const r = stored.record;
    const times = {
      convergedAt: r.converged.at,
      soakStartedAt: r.soak.startedAt,
      ...(r.soak.passedAt ? { soakPassedAt: r.soak.passedAt } : {}),
    };
    const problem = verificationProblem(r, release, stack);
    if (!problem)
      return {
        ...base,
        verification: {
          state: "verified",
          detail:
            `soak passed ${r.soak.passedAt}; ` +
            (r.signature ? `signed with key ${r.signature.keyId}` : "unsigned (no signing key was given to verify)") +
            chainDetail(r),
          ...times,
        },
      };
    if (r.soak.result === "running" && r.digest === base.digest && !recordIntegrityProblem(r, stack))
      return {
        ...base,
        verification: {
          state: "soaking",
          detail:
            `converged ${r.converged.at}; soak of ${r.soak.minutes} min since ${r.soak.startedAt}, ` +
            `last healthy ${r.soak.lastHealthyAt}` +
            chainDetail(r),
          ...times,
        },
      };
    return { ...base, verification: { state: "invalid", detail: problem, ...times } };
  } catch (e) {
    return { ...base, verification: { state: "invalid", detail: (e as Error).message.split("\n")[0] } };
  }
}

/** A chained release's steps as the record tells them: which the converging run saw converged. */
function chainDetail(r: VerificationRecord): string {
  const steps = r.converged.chain;
  if (!steps?.length) return "";
  return (
    "; chain steps " +
    steps
      .map((st) => `${st.kubernetesVersion ?? st.minor} ${st.verified ? "verified" : "not seen by that run"}`)
      .join(", ")
  );
}
