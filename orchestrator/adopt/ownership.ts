// Adoption and the cluster's owner (core/ownership.ts): a cluster another stack owns is
// refused, naming it and the way out; otherwise the marker is claimed for this stack in one
// compare-and-put before anything is recorded, so of two adoptions racing only one wins. If
// the record then fails, the claim is undone: a refused adoption leaves the cluster as it was.
import type { EtcdEdge } from "../core/edges";
import {
  claimDecision,
  describeOwner,
  ownerMarkerJson,
  ownerReadOf,
  sameOwner,
  type Claimant,
  type OwnerRecord,
} from "../core/ownership";
import type { Refuse } from "./errors";

type OwnerCalls = Pick<EtcdEdge, "readOwner" | "writeOwner" | "removeOwner">;

export interface Claim {
  /** For the `check` event: what was found and done. */
  detail: string;
  /** Puts back what the claim replaced (nothing, or the previous owner's marker) if it is still this claim's. */
  undo(): Promise<void>;
}

export async function claimForAdoption(
  etcd: OwnerCalls,
  c: Omit<Claimant, "command">,
  refuse: Refuse,
  now: () => Date = () => new Date(),
): Promise<Claim> {
  const claimant: Claimant = { ...c, command: "adopt" };
  let before: OwnerRecord | undefined;
  try {
    before = await etcd.readOwner();
  } catch (e) {
    refuse(`the cluster's ownership marker cannot be read: ${(e as Error).message.split("\n")[0]}`);
  }
  const d = claimDecision(claimant, ownerReadOf(before));
  switch (d.kind) {
    case "refuse":
      return refuse(d.problem);
    case "unobserved":
      return refuse(`the cluster's ownership marker cannot be read: ${d.error}`);
    case "owned":
      return { detail: `the cluster is already owned by ${describeOwner(c.self)}`, undo: async () => {} };
    case "claim":
      break;
  }
  const value = ownerMarkerJson({ ...c.self, claimedAt: now().toISOString(), by: "adopt" });
  const r = await etcd.writeOwner(value, d.ifRevision);
  if (!r.ok) {
    const current = ownerReadOf(r.current);
    // Its own write landed already (its answer was lost and the call went to another member).
    if (current.kind === "claimed" && sameOwner(current.marker, c.self))
      return { detail: `claimed for ${describeOwner(c.self)}`, undo: async () => {} };
    const again = claimDecision({ self: c.self, command: "adopt" }, current);
    refuse(
      `the cluster's ownership changed while this adoption ran: ` +
        (again.kind === "refuse" ? again.problem : `its marker was removed meanwhile; run this command again`),
    );
  }
  const revision = r.ok ? r.revision : "";
  const previous = before?.value;
  return {
    detail: d.from
      ? `taken over from ${describeOwner(d.from)} (--take-over ${d.from.stack}) for ${describeOwner(c.self)}`
      : `claimed for ${describeOwner(c.self)}`,
    undo: async () => {
      if (previous === undefined) await etcd.removeOwner(revision);
      else await etcd.writeOwner(previous, revision);
    },
  };
}
