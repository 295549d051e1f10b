// Static node addresses from a configured pool (vSphere without DHCP reservations): each
// node gets one address when its entry is made, stored in the entry, and keeps it for its
// life, so its etcd member's peer URL never changes under it.
import type { NodeEntry } from "./nodes";

function toNumber(ip: string): number {
  return ip.split(".").reduce((n, o) => n * 256 + Number(o), 0);
}

function toIp(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
}

/** Every address of a pool given as single addresses and inclusive ranges ("10.0.0.11-10.0.0.20"). */
export function expandAddressPool(pool: readonly string[]): string[] {
  const out: string[] = [];
  for (const item of pool) {
    const [from, to = from] = item.split("-").map((s) => s.trim());
    if (!isIPv4(from) || !isIPv4(to)) throw new Error(`${JSON.stringify(item)} is not an IPv4 address or range a-b`);
    const a = toNumber(from);
    const b = toNumber(to);
    if (b < a) throw new Error(`range ${JSON.stringify(item)} ends before it starts`);
    if (b - a > 1024) throw new Error(`range ${JSON.stringify(item)} has more than 1024 addresses`);
    for (let n = a; n <= b; n++) out.push(toIp(n));
  }
  const dup = out.find((x, i) => out.indexOf(x) !== i);
  if (dup) throw new Error(`address ${dup} is in the pool twice`);
  return out;
}

/** Is `ip` inside `network/prefixLength`? */
export function inSubnet(ip: string, network: string, prefixLength: number): boolean {
  const mask = prefixLength === 0 ? 0 : 2 ** 32 - 2 ** (32 - prefixLength);
  const and = (n: number) => Number(BigInt(n) & BigInt(mask));
  return and(toNumber(ip)) === and(toNumber(network));
}

/**
 * The address of a new node: the first free pool address after the newest node's (cyclic),
 * so a retired node's address is reused as late as the pool allows (ARP caches and the
 * members' memory of it have long moved on by then).
 */
export function assignStaticAddress(entry: NodeEntry, nodes: readonly NodeEntry[], pool: readonly string[]): NodeEntry {
  if (entry.address !== undefined || pool.length === 0) return entry;
  const used = new Set(nodes.map((n) => n.address).filter((a): a is string => a !== undefined));
  const newest = [...nodes].filter((n) => n.address).sort((a, b) => b.generation - a.generation)[0]?.address;
  const start = newest ? pool.indexOf(newest) + 1 : 0;
  for (let i = 0; i < pool.length; i++) {
    const candidate = pool[(start + i) % pool.length];
    if (!used.has(candidate)) return { ...entry, address: candidate };
  }
  throw new Error(
    `no free static address for ${entry.name}: all ${pool.length} pool addresses are in use ` +
      `(${[...used].join(", ")}); ` +
      "the pool needs at least replicas + 1 addresses (one for the surge)",
  );
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export function isIPv4(s: string): boolean {
  return IPV4.test(s);
}
