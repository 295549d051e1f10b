// etcd member IDs: the etcd3 client gives them as decimal strings (uint64); etcdctl, etcd's
// logs and every etcd document print them in hex. Humans read hex.

/** "10501334649042878790" -> "91bc3c398fb3c146"; anything not a decimal uint64 is returned as it is. */
export function hexMemberId(id: string): string {
  return /^\d{1,20}$/.test(id) ? BigInt(id).toString(16) : id;
}
