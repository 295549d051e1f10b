// A cluster has one owner: the stack (its name and its backend) whose node list molt rolls.
// A marker in the cluster's own etcd (OWNER_KEY) names it. `molt adopt` claims it before it
// records anything, every rollout claims it where it is absent (a cluster made by an older
// molt, or molt's own new cluster) and refuses any change while another stack holds it, and
// `molt disown` releases it. Every write is a compare-and-swap, so two claims cannot both win.
// These are the rules over plain data; the etcd calls are EtcdEdge's readOwner, writeOwner
// and removeOwner.

export const OWNER_KEY = "/molt/owner";

/** Who owns a cluster: a stack in its backend (the URL without credentials, query or fragment). */
export interface ClusterOwner {
  stack: string;
  backend: string;
}

/** The marker as molt writes it (JSON) under OWNER_KEY. */
export interface OwnerMarker extends ClusterOwner {
  /** When it was claimed (ISO 8601). */
  claimedAt: string;
  /** Which command claimed it. */
  by: "adopt" | "rollout";
}

/** The marker's key as one read found it. */
export type OwnerRead =
  | { kind: "absent" }
  | { kind: "claimed"; marker: OwnerMarker; revision: string }
  /** The key holds something that is not a marker molt writes (not JSON, or a field missing). */
  | { kind: "invalid"; why: string; revision: string }
  /** The key could not be read (no member answered). */
  | { kind: "unobserved"; error: string };

/** The key's value and revision, as EtcdEdge.readOwner returns them. */
export interface OwnerRecord {
  value: string;
  revision: string;
}

/** What the ownership of the cluster means for a run of `self`. */
export interface Ownership {
  self: ClusterOwner;
  marker: OwnerRead;
}

export function ownerMarkerJson(m: OwnerMarker): string {
  return JSON.stringify({ stack: m.stack, backend: m.backend, claimedAt: m.claimedAt, by: m.by });
}

/** The marker a value holds, or why it is none. */
export function parseOwnerMarker(value: string): OwnerMarker | { invalid: string } {
  let v: unknown;
  try {
    v = JSON.parse(value);
  } catch {
    return { invalid: `not valid JSON (${JSON.stringify(value.slice(0, 60))})` };
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return { invalid: "not a JSON object" };
  const o = v as Record<string, unknown>;
  const missing = ["stack", "backend", "claimedAt"].filter((k) => typeof o[k] !== "string" || o[k] === "");
  if (missing.length) return { invalid: `no ${missing.join(", ")}` };
  if (o.by !== "adopt" && o.by !== "rollout")
    return { invalid: `"by" is ${JSON.stringify(o.by)}, not adopt or rollout` };
  return { stack: o.stack as string, backend: o.backend as string, claimedAt: o.claimedAt as string, by: o.by };
}

export function ownerReadOf(record: OwnerRecord | undefined): OwnerRead {
  if (!record) return { kind: "absent" };
  const m = parseOwnerMarker(record.value);
  return "invalid" in m
    ? { kind: "invalid", why: m.invalid, revision: record.revision }
    : { kind: "claimed", marker: m, revision: record.revision };
}

export function sameOwner(a: ClusterOwner, b: ClusterOwner): boolean {
  return a.stack === b.stack && a.backend === b.backend;
}

export function describeOwner(o: ClusterOwner): string {
  return `stack ${o.stack} (backend ${o.backend})`;
}

function describeMarker(m: OwnerMarker): string {
  return `${describeOwner(m)}, claimed by molt ${m.by} at ${m.claimedAt}`;
}

/** The command asking: how its refusals name the way out. */
export interface Claimant {
  command: "adopt" | "rollout";
  self: ClusterOwner;
  /** --take-over: the stack named as the current owner, to take the cluster from. */
  takeOver?: string;
}

export type ClaimDecision =
  /** The marker names `self`: nothing to write. */
  | { kind: "owned" }
  /** Write the marker: where the key is absent, or (a take-over) still at `ifRevision`. */
  | { kind: "claim"; ifRevision?: string; from?: OwnerMarker }
  | { kind: "refuse"; condition: string; problem: string }
  /** The marker could not be read. */
  | { kind: "unobserved"; error: string };

const KEY_BY_HAND =
  `read it with \`etcdctl get ${OWNER_KEY}\` on a control-plane node; if no stack owns the cluster, remove it ` +
  `with \`etcdctl del ${OWNER_KEY}\``;

/**
 * What a command that is about to change the cluster (adopt records it, a rollout changes its
 * members) must do about the marker. A marker of another stack refuses, naming it and the way
 * out; `--take-over` must name that stack exactly.
 */
export function claimDecision(c: Claimant, read: OwnerRead): ClaimDecision {
  const { self, takeOver } = c;
  const retry = c.command === "adopt" ? "this command" : `\`molt rollout --stack ${self.stack}\``;
  switch (read.kind) {
    case "unobserved":
      return { kind: "unobserved", error: read.error };
    case "invalid":
      return {
        kind: "refuse",
        condition: "ClusterOwnerMarkerInvalid",
        problem:
          `the cluster's ownership marker ${OWNER_KEY} is not one molt writes (${read.why}), so molt cannot tell ` +
          `which stack owns the cluster; nothing was changed. ${cap(KEY_BY_HAND)}, then run ${retry} again`,
      };
    case "absent":
      if (takeOver !== undefined)
        return {
          kind: "refuse",
          condition: "ClusterNotOwned",
          problem:
            `--take-over ${takeOver}: the cluster has no ownership marker (no stack owns it), so there is nothing ` +
            `to take over; nothing was changed. Run it without --take-over`,
        };
      return { kind: "claim" };
    case "claimed": {
      const m = read.marker;
      // Its own marker: a take-over that already happened (a rerun) needs nothing more.
      if (sameOwner(m, self)) return { kind: "owned" };
      if (takeOver === m.stack) return { kind: "claim", ifRevision: read.revision, from: m };
      const wrong =
        takeOver !== undefined ? `--take-over ${takeOver} does not name it (it must name the current owner); ` : "";
      const takeOverHow =
        c.command === "adopt"
          ? `add \`--take-over ${m.stack}\` to this command`
          : `run \`molt rollout --stack ${self.stack} --take-over ${m.stack}\``;
      return {
        kind: "refuse",
        condition: "ClusterOwnedByAnotherStack",
        problem:
          `the cluster is owned by ${describeMarker(m)}, not by ${describeOwner(self)}; ${wrong}nothing was ` +
          `changed. One stack rolls a cluster: use stack ${m.stack}, or release the cluster with ` +
          `\`molt disown --stack ${m.stack}\` (with that stack's backend), or, if stack ${m.stack} is gone, ` +
          `${takeOverHow}`,
      };
    }
  }
}

export type DisownDecision =
  | { kind: "remove"; revision: string; marker: OwnerMarker }
  /** No marker: nothing to release (a rerun, or a cluster never claimed). */
  | { kind: "nothing"; message: string }
  | { kind: "refuse"; problem: string };

/** `molt disown --stack S`: the marker goes only if it names S with S's backend. */
export function disownDecision(self: ClusterOwner, read: OwnerRead): DisownDecision {
  switch (read.kind) {
    case "unobserved":
      return {
        kind: "refuse",
        problem: `the cluster's ownership marker could not be read (${read.error}); nothing was changed`,
      };
    case "absent":
      return {
        kind: "nothing",
        message: `the cluster has no ownership marker: no stack owns it, nothing to release; nothing was changed`,
      };
    case "invalid":
      return {
        kind: "refuse",
        problem:
          `the cluster's ownership marker ${OWNER_KEY} is not one molt writes (${read.why}); nothing was changed. ` +
          cap(KEY_BY_HAND),
      };
    case "claimed":
      if (sameOwner(read.marker, self)) return { kind: "remove", revision: read.revision, marker: read.marker };
      return {
        kind: "refuse",
        problem:
          `the cluster is owned by ${describeMarker(read.marker)}, not by ${describeOwner(self)}; nothing was ` +
          `changed. Only the owner releases it: \`molt disown --stack ${read.marker.stack}\` with that stack's ` +
          `backend`,
      };
  }
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
