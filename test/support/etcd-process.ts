// A one-member etcd from the host's binary (Debian's etcd), for integration tests: its data in
// `dir`/data, peers on loopback over plain HTTP, clients on `clientUrl` (extra flags for TLS).
import { spawn, type ChildProcess } from "node:child_process";

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
