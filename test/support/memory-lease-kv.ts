// An in-memory LeaseKv (orchestrator/lease/cluster.ts) with etcd's rules: a key on a lease goes
// when the lease does, transactions compare revisions. `now` is the clock leases expire on
// (tests move it). Two runners in one test share one instance, as they share one cluster.
import type { KvEntry, LeaseKv } from "../../orchestrator/core/edges";

export class MemoryLeaseKv implements LeaseKv {
  readonly location = "the fake cluster's etcd";
  private rev = 1;
  private nextLease = 100;
  private readonly leases = new Map<string, { ttl: number; expiresAt: number }>();
  private readonly keys = new Map<string, KvEntry>();
  /** Fails every call while set (an unreachable cluster). */
  down = false;

  constructor(readonly now: () => number = Date.now) {}

  private tick(): void {
    if (this.down) throw new Error("14 UNAVAILABLE: no etcd member is reachable");
    for (const [id, l] of this.leases)
      if (l.expiresAt <= this.now()) {
        this.leases.delete(id);
        for (const [k, e] of this.keys) if (e.lease === id) this.keys.delete(k);
      }
  }

  async grant(ttl: number): Promise<string> {
    this.tick();
    const id = String(this.nextLease++);
    this.leases.set(id, { ttl, expiresAt: this.now() + ttl * 1000 });
    return id;
  }
  async keepAlive(id: string): Promise<number> {
    this.tick();
    const l = this.leases.get(id);
    if (!l) return 0;
    l.expiresAt = this.now() + l.ttl * 1000;
    return l.ttl;
  }
  async timeToLive(id: string): Promise<number> {
    this.tick();
    const l = this.leases.get(id);
    return l ? Math.ceil((l.expiresAt - this.now()) / 1000) : -1;
  }
  async revoke(id: string): Promise<void> {
    this.tick();
    this.leases.delete(id);
    for (const [k, e] of this.keys) if (e.lease === id) this.keys.delete(k);
  }
  async take(key: string, last: string, value: Buffer, lease: string, ifRevision?: string) {
    this.tick();
    const cur = this.keys.get(key);
    const free = ifRevision ? cur?.revision === ifRevision : !cur;
    if (!free) return { ok: false as const, ...(cur ? { current: cur } : {}) };
    if (!this.leases.has(lease)) throw new Error("etcdserver: requested lease not found");
    const previousLast = this.keys.get(last)?.value;
    const revision = String(++this.rev);
    this.keys.set(key, { value, lease, revision });
    this.keys.set(last, { value, lease: "0", revision });
    return { ok: true as const, revision, ...(previousLast ? { previousLast } : {}) };
  }
  async get(key: string): Promise<KvEntry | undefined> {
    this.tick();
    return this.keys.get(key);
  }
  async release(key: string, last: string, revision: string): Promise<boolean> {
    this.tick();
    if (this.keys.get(key)?.revision !== revision) return false;
    this.keys.delete(key);
    this.keys.delete(last);
    this.rev++;
    return true;
  }
  /** What a key holds (tests). */
  peek(key: string): KvEntry | undefined {
    return this.keys.get(key);
  }
}
