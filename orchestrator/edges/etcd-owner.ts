// The cluster's ownership marker (core/ownership.ts) in its etcd: one key, written and
// deleted only in transactions that compare its revision, through whichever member answers.
import type { EtcdEdge } from "../core/edges";
import { OWNER_KEY, type OwnerRecord } from "../core/ownership";
import { anyMember, fastest, type Clients } from "./etcd-members";

type OwnerCalls = Pick<EtcdEdge, "readOwner" | "writeOwner" | "removeOwner">;

export function etcdOwnerCalls(clients: Clients): OwnerCalls {
  const record = (kv: { value: Buffer; mod_revision: string } | undefined): OwnerRecord | undefined =>
    kv ? { value: Buffer.from(kv.value).toString("utf8"), revision: kv.mod_revision } : undefined;
  return {
    readOwner: () =>
      fastest(clients, "reading the ownership marker", async (c) => {
        const r = await c.kv.range({ key: Buffer.from(OWNER_KEY), serializable: false });
        return record(r.kvs[0]);
      }),
    writeOwner: (value, ifRevision) =>
      anyMember(clients, "writing the ownership marker", async (c) => {
        // Absent: its create revision is 0. A take-over: its last change is the one read.
        const r = await c
          .if(OWNER_KEY, ifRevision ? "Mod" : "Create", "==", ifRevision ? Number(ifRevision) : 0)
          .then(c.put(OWNER_KEY).value(value))
          .else(c.get(OWNER_KEY))
          .commit();
        if (r.succeeded) return { ok: true as const, revision: r.header.revision };
        const current = record(r.responses[0].response_range.kvs[0]);
        return { ok: false as const, ...(current ? { current } : {}) };
      }),
    removeOwner: (revision) =>
      anyMember(clients, "removing the ownership marker", async (c) => {
        const r = await c.if(OWNER_KEY, "Mod", "==", Number(revision)).then(c.delete().key(OWNER_KEY)).commit();
        return r.succeeded;
      }),
  };
}
