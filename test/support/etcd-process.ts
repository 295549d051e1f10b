// A one-member etcd from the host's binary (Debian's etcd), for integration tests: its data in
// `dir`/data, peers on loopback over plain HTTP, clients on `clientUrl` (extra flags for TLS).
import { spawn, type ChildProcess } from "node:child_process";
import type { Etcd3 } from "etcd3";

export function spawnEtcd(dir: string, clientUrl: string, peerPort: number, extra: string[] = []): ChildProcess {
  const peer = `http://127.0.0.1:${peerPort}`;
  return spawn(
    "etcd",
    [
      `--data-dir=${dir}/data`,
      `--listen-client-urls=${clientUrl}`,
      `--advertise-client-urls=${clientUrl}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=default=${peer}`,
      ...extra,
    ],
    { stdio: "ignore" },
  );
}

/** Resolves once `client`'s etcd answers a status call (about 10 s at most, then the last error). */
export async function untilEtcdAnswers(client: Etcd3): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await client.maintenance.status();
      return;
    } catch (e) {
      if (i > 100) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
