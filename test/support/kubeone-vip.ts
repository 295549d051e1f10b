// The API endpoint VIP the way KubeOne's vSphere terraform example makes it, WITHOUT molt's
// code path: the installer writes /etc/keepalived/keepalived.conf and a check script on each
// control-plane host over SSH and starts keepalived. What it reproduces (read from
// kubermatic/kubeone examples/terraform/vsphere: main.tf, the keepalived.conf and
// check_apiserver.sh templates): one vrrp_instance with the cluster's virtual_router_id, the
// first host MASTER at priority 101 and the others BACKUP at 100 (keepalived preempts by
// default), `auth_type PASS` with a random 8-character auth_pass, the VIP without a prefix,
// and a track script run every 3 s with weight -2 (fall 10, rise 2) that checks the local
// endpoint and, on the holder, the endpoint through the VIP. The lab's stand-in for the API
// server is the etcd-only cluster's client endpoint (its etcd /health with the healthcheck
// client certificate). The lab has no systemd: keepalived runs as a process with its
// default pid file, its log under /var/log/molt.
import { randomBytes } from "node:crypto";
import type { ForeignCluster } from "./foreign";

export interface KubeOneVip {
  address: string;
  virtualRouterId: number;
  /** The group's auth_pass: what the test looks for in everything molt reports and stores. */
  authPass: string;
}

/** An 8-character alphanumeric password, as terraform's random_string (special = false) makes. */
export function randomAuthPass(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(8)].map((b) => alphabet[b % alphabet.length]).join("");
}

export function kubeoneKeepalivedConf(v: KubeOneVip, o: { master: boolean; iface: string }): string {
  const conf = [
    "# the control-plane VIP (installer-made, KubeOne vSphere style)",
    "global_defs {",
    "  router_id LVS_DEVEL",
    "}",
    "vrrp_script check_apiserver {",
    '  script "/etc/keepalived/check_apiserver.sh"',
    "  interval 3",
    "  weight -2",
    "  fall 10",
    "  rise 2",
    "}",
    "vrrp_instance VI_1 {",
    `  state ${o.master ? "MASTER" : "BACKUP"}`,
    `  interface ${o.iface}`,
    `  virtual_router_id ${v.virtualRouterId}`,
    `  priority ${o.master ? 101 : 100}`,
    "  authentication {",
    "    auth_type PASS",
    `    auth_pass ${v.authPass}`,
    "  }",
    "  virtual_ipaddress {",
    `    ${v.address}`,
    "  }",
    "  track_script {",
    "    check_apiserver",
    "  }",
    "}",
    "",
  ];
  return conf.join("\n");
}

/** The check script: the local endpoint, and on the VIP's holder the endpoint through the VIP. */
export function kubeoneCheckScript(vip: string): string {
  const pki = "/etc/kubernetes/pki/etcd";
  const get = (host: string) =>
    `curl --silent --fail --max-time 2 --cacert ${pki}/ca.crt --cert ${pki}/healthcheck-client.crt ` +
    `--key ${pki}/healthcheck-client.key --resolve localhost:2379:${host} https://localhost:2379/health -o /dev/null`;
  return `#!/bin/sh
errorExit() {
    echo "*** $*" 1>&2
    exit 1
}
${get("127.0.0.1")} || errorExit "Error GET local etcd /health"
if ip addr | grep -q ${vip}; then
    ${get(vip)} || errorExit "Error GET ${vip} etcd /health"
fi
`;
}

/** Installs the group on every node of the cluster and waits until the first node holds the VIP. */
export async function installKubeOneVip(c: ForeignCluster, v: KubeOneVip): Promise<void> {
  for (const [i, n] of c.nodes.entries()) {
    // The interface that holds the node's address (vrrp_interface in KubeOne's variables).
    const iface = (
      await c.ssh(n.name, `ip -o -4 addr show | awk '$4 ~ /^${n.address.replace(/\./g, "\\.")}\\// { print $2 }'`)
    ).trim();
    if (!iface) throw new Error(`no interface holds ${n.address} on ${n.name}`);
    await c.ssh(
      n.name,
      "bash -s",
      `set -euo pipefail
mkdir -p /etc/keepalived /var/log/molt
umask 077
cat > /etc/keepalived/keepalived.conf <<'CONF'
${kubeoneKeepalivedConf(v, { master: i === 0, iface })}CONF
cat > /etc/keepalived/check_apiserver.sh <<'CHECK'
${kubeoneCheckScript(v.address)}CHECK
chmod +x /etc/keepalived/check_apiserver.sh
setsid keepalived --dont-fork --log-console --log-detail >>/var/log/molt/owner-keepalived.log 2>&1 </dev/null &
for i in $(seq 1 100); do [ -f /run/keepalived.pid ] && exit 0; sleep 0.1; done
echo "keepalived did not start on ${n.name}" >&2; exit 1
`,
    );
  }
  const first = c.nodes[0];
  // The MASTER takes the VIP once its check passed (rise 2 at 3 s: about 6 s); 60 s at most.
  await c.ssh(
    first.name,
    `for i in $(seq 1 600); do ip -o -4 addr show | grep -qF ' ${v.address}/' && exit 0; sleep 0.1; done; ` +
      `echo "the VIP ${v.address} did not come up on ${first.name}" >&2; ` +
      "tail -n 20 /var/log/molt/owner-keepalived.log >&2; exit 1",
  );
}
