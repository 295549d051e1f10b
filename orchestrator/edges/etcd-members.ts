// Calls that any member of the cluster can answer (a lease, the ownership marker), over one
// etcd3 client per member: `clients` is asked on every call, since the members change as a
// rollout replaces nodes.
import type { Etcd3 } from "etcd3";

export type Clients = () => Etcd3[];

/** Transactions: to each member in turn, the first answer wins. */
export async function anyMember<T>(clients: Clients, what: string, call: (c: Etcd3) => Promise<T>): Promise<T> {
  const all = clients();
  if (all.length === 0) throw new Error(`no etcd member is reachable (${what})`);
  const errors: string[] = [];
  for (const c of all) {
    try {
      return await call(c);
    } catch (e) {
      errors.push((e as Error).message.split("\n")[0]);
    }
  }
  throw new Error(`${what} failed on every reachable member: ${[...new Set(errors)].join("; ")}`);
}

/**
 * Reads and keep-alives (idempotent): to every member at once, the first answer wins. A member
 * that hangs (partitioned, being replaced) costs nothing.
 */
export async function fastest<T>(clients: Clients, what: string, call: (c: Etcd3) => Promise<T>): Promise<T> {
  const all = clients();
  if (all.length === 0) throw new Error(`no etcd member is reachable (${what})`);
  try {
    return await Promise.any(all.map(call));
  } catch (e) {
    const errors = e instanceof AggregateError ? e.errors : [e];
    const lines = errors.map((x: unknown) => String((x as Error)?.message ?? x).split("\n")[0]);
    throw new Error(`${what} failed on every reachable member: ${[...new Set(lines)].join("; ")}`);
  }
}
