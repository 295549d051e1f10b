// Runtime of LabMachine: a "VM" made of a network namespace on the lab bridge, private
// mount and UTS namespaces, the image's binaries, and a real OpenSSH server with a host
// key generated ahead. Its processes outlive molt; deleting it kills every process in
// its namespace and removes its interfaces, mounts and directory.
import { spawn } from "node:child_process";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { readLabImage } from "./image";
import {
  assertRoot,
  ensureBridge,
  ensureIsolatedBridge,
  ifaceName,
  LabHostError,
  netnsName,
  parseSubnet,
  sh,
  waitFor,
  waitForBanner,
} from "./host";
import type { LabMachineInputs, LabMachineOutputs } from "./machine";

const BOOT_DEADLINE_MS = 60_000;
const STOP_DEADLINE_MS = 30_000;

export function labDir(i: Pick<LabMachineInputs, "labRoot" | "lab">): string {
  return join(i.labRoot, "labs", i.lab);
}

export function machineDir(i: Pick<LabMachineInputs, "labRoot" | "lab" | "name">): string {
  return join(labDir(i), "machines", i.name);
}

const ROOT_HOME = "root";

/** Directories a machine owns, bind-mounted over the same paths inside it. */
export const MACHINE_PATHS = [
  "etc/kubernetes",
  "var/lib/etcd",
  "var/lib/kubelet",
  "etc/ssh",
  // root's home, like a fresh VM's: the host's (its .bashrc, tool caches, a lock a killed
  // `pyenv rehash` left) never runs in a machine's SSH sessions. Mounted last (initScript).
  ROOT_HOME,
  "var/log/molt",
  // keepalived's configuration (VIP mode): each machine's own, like /etc/keepalived on a VM.
  "etc/keepalived",
  // Where an API server with an audit policy writes its log (KubeOne's staticAuditLog
  // default): each machine's own, so an audit log seen on a machine was written there.
  "var/log/kubernetes",
];

function allocateAddress(i: LabMachineInputs): string {
  const subnet = parseSubnet(i.subnet);
  const dir = join(labDir(i), "addresses");
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(dir)) {
    if (readFileSync(join(dir, f), "utf8").trim() === i.name) return f;
  }
  for (let host = 10; host < 250; host++) {
    const ip = `${subnet.prefix}.${host}`;
    try {
      // O_EXCL: two machines created at once never get the same address.
      const fd = openSync(join(dir, ip), "wx");
      writeFileSync(fd, i.name + "\n");
      closeSync(fd);
      return ip;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
  }
  throw new LabHostError(`lab ${i.lab}: no free address left in ${i.subnet}`);
}

function releaseAddress(i: LabMachineInputs): void {
  const dir = join(labDir(i), "addresses");
  if (!existsSync(dir)) return;
  for (const f of readdirSync(dir)) {
    if (readFileSync(join(dir, f), "utf8").trim() === i.name) rmSync(join(dir, f), { force: true });
  }
}

/** A locally administered unicast MAC derived from the IPv4 address. */
export function macFor(address: string): string {
  return ["02", "6d", ...address.split(".").map((o) => Number(o).toString(16).padStart(2, "0"))].join(":");
}

function sshdConfig(address: string): string {
  return [
    `ListenAddress ${address}`,
    "Port 22",
    "HostKey /etc/ssh/ssh_host_ed25519_key",
    "PermitRootLogin prohibit-password",
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "KbdInteractiveAuthentication no",
    "AuthorizedKeysFile .ssh/authorized_keys",
    "UsePAM no",
    "PidFile /run/sshd.pid",
    "AllowTcpForwarding local",
    "MaxSessions 64",
    "MaxStartups 64:30:128",
    "Subsystem sftp internal-sftp",
    "",
  ].join("\n");
}

export function initScript(i: LabMachineInputs, dir: string, imageDir: string, address: string): string {
  const bind = (p: string) => `mkdir -p '/${p}' && mount --bind '${dir}/root/${p}' '/${p}'`;
  const binds = MACHINE_PATHS.filter((p) => p !== ROOT_HOME)
    .map(bind)
    .join("\n");
  return `#!/bin/sh
# The "boot" of lab machine ${i.name}: runs in its own network, mount and UTS namespaces.
set -eu
hostname '${i.name}'
${binds}
mount --bind '${imageDir}/bin' /usr/local/bin
mount -o remount,bind,ro /usr/local/bin
mount --bind '${imageDir}/etc/os-release' /etc/os-release
# After the binds above: a lab root under the host's /root stays reachable for them.
${bind(ROOT_HOME)}
# Fresh /tmp and /run last: a lab root under /tmp (MOLT_LAB_ROOT) stays reachable for the binds.
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd /run/molt
echo '${i.image}' > /run/molt/image
${kubeletStart(i, imageDir, address)}sshd=/usr/sbin/sshd
[ -x /usr/local/bin/sshd ] && sshd=/usr/local/bin/sshd
exec "$sshd" -D -e -f /etc/ssh/sshd_config
`;
}

/**
 * Images with Kubernetes carry lab-kubelet, the machine's kubelet and container runtime
 * (tools/lab/kubelet): started at boot like the kubelet unit, it runs the static pods
 * kubeadm writes and keeps the Node object of this machine.
 */
function kubeletStart(i: LabMachineInputs, imageDir: string, address: string): string {
  const meta = readLabImage(i.labRoot, i.image);
  if (!meta?.kubernetesVersion || !existsSync(join(imageDir, "bin", "lab-kubelet"))) return "";
  return `export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /etc/kubernetes/manifests /var/lib/kubelet/pki
setsid /usr/local/bin/lab-kubelet --node-name '${i.name}' --node-ip '${address}' \\
  --kubelet-version '${meta.kubernetesVersion}' >>/var/log/molt/kubelet.log 2>&1 </dev/null &
`;
}

async function netnsPids(ns: string): Promise<number[]> {
  const out = await sh("ip", ["netns", "pids", ns], { allowFail: true });
  return out.split(/\s+/).filter(Boolean).map(Number);
}

async function destroyMachine(i: LabMachineInputs): Promise<void> {
  const ns = netnsName(i.lab, i.name);
  const nsExists = existsSync(join("/run/netns", ns));
  if (nsExists) {
    for (const pid of await netnsPids(ns)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    await waitFor(
      `every process of machine ${i.name} to exit`,
      async () => (await netnsPids(ns)).length === 0,
      STOP_DEADLINE_MS,
    );
    await sh("ip", ["netns", "del", ns]);
  }
  // Deleting the namespace removes the peer; the host end goes with it, but a crash between
  // creating the pair and moving the peer can leave the host end behind.
  await sh("ip", ["link", "del", ifaceName("h", i.name)], { allowFail: true });
  await sh("ip", ["link", "del", ifaceName("p", i.name)], { allowFail: true });
  // A second interface (addInterface), likewise.
  await sh("ip", ["link", "del", ifaceName("h", `${i.name}/eth1`)], { allowFail: true });
  rmSync(machineDir(i), { recursive: true, force: true });
  releaseAddress(i);
}

export async function create(i: LabMachineInputs): Promise<{ id: string; outs: LabMachineInputs & LabMachineOutputs }> {
  assertRoot();
  const imageDir = join(i.labRoot, "images", i.image);
  if (!existsSync(join(imageDir, "image.json"))) {
    const have = existsSync(join(i.labRoot, "images"))
      ? readdirSync(join(i.labRoot, "images")).filter((f) => !f.startsWith("."))
      : [];
    throw new LabHostError(
      `lab image "${i.image}" does not exist in ${join(i.labRoot, "images")} (have: ${have.join(", ") || "none"}); ` +
        `run tools/lab/build-images.sh`,
    );
  }
  const subnet = parseSubnet(i.subnet);
  if (i.isolated) await ensureIsolatedBridge(i.bridge);
  else await ensureBridge(i.bridge, subnet);

  // A directory without a state entry is what a crashed earlier create left: start over.
  const dir = machineDir(i);
  if (existsSync(dir) || existsSync(join("/run/netns", netnsName(i.lab, i.name)))) await destroyMachine(i);

  const address = allocateAddress(i);
  for (const p of MACHINE_PATHS) mkdirSync(join(dir, "root", p), { recursive: true });
  mkdirSync(join(dir, "root/root/.ssh"), { recursive: true, mode: 0o700 });
  chmodSync(join(dir, "root/root"), 0o700);
  writeFileSync(join(dir, "root/etc/ssh/ssh_host_ed25519_key"), i.hostPrivateKey.trimEnd() + "\n", { mode: 0o600 });
  writeFileSync(join(dir, "root/etc/ssh/ssh_host_ed25519_key.pub"), i.hostPublicKey.trim() + "\n");
  writeFileSync(join(dir, "root/etc/ssh/sshd_config"), sshdConfig(address));
  writeFileSync(join(dir, "root/root/.ssh/authorized_keys"), i.authorizedKey.trim() + "\n", { mode: 0o600 });
  writeFileSync(join(dir, "init.sh"), initScript(i, dir, imageDir, address), { mode: 0o755 });

  const ns = netnsName(i.lab, i.name);
  const hostIf = ifaceName("h", i.name);
  const peerIf = ifaceName("p", i.name);
  // A host end left by a machine whose namespace went without it (its processes were still
  // exiting) would make the new pair fail with "File exists".
  await sh("ip", ["link", "del", hostIf], { allowFail: true });
  await sh("ip", ["netns", "add", ns]);
  await sh("ip", ["link", "add", hostIf, "type", "veth", "peer", "name", peerIf]);
  await sh("ip", ["link", "set", peerIf, "netns", ns]);
  await sh("ip", ["link", "set", hostIf, "master", i.bridge, "up"]);
  await sh("ip", ["-n", ns, "link", "set", peerIf, "name", "eth0"]);
  // The MAC follows the address: when an address is used again by a later machine, the
  // neighbour caches of the host and the other machines are still right (no 30 s of ARP staleness).
  await sh("ip", ["-n", ns, "link", "set", "eth0", "address", macFor(address)]);
  await sh("ip", ["-n", ns, "addr", "add", `${address}/${subnet.bits}`, "dev", "eth0"]);
  await sh("ip", ["-n", ns, "link", "set", "eth0", "up"]);
  await sh("ip", ["-n", ns, "link", "set", "lo", "up"]);
  // etcd's ports are for the other members only: the host (the gateway; a "cloud" outside
  // the control plane) reaches a machine's etcd only through an SSH tunnel, like a security
  // group that admits 2379-2380 from the control-plane subnet's machines. The local table
  // moves behind a rule that refuses those ports from the gateway. (An isolated bridge has
  // no gateway: the host cannot reach the machine at all.)
  if (!i.isolated) await refuseEtcdFromGateway(ns, subnet.gateway);

  const log = openSync(join(dir, "boot.log"), "a");
  const child = spawn(
    "ip",
    ["netns", "exec", ns, "unshare", "--mount", "--uts", "--propagation", "private", "/bin/sh", join(dir, "init.sh")],
    {
      detached: true,
      stdio: ["ignore", log, log],
    },
  );
  let exited: string | undefined;
  child.once(
    "exit",
    (code, signal) => (exited = `the machine's init exited (${signal ?? `code ${code}`}) before its sshd answered`),
  );
  child.unref();
  closeSync(log);
  try {
    // The lab "cloud" watches an isolated machine's boot from inside its namespace (a
    // cloud's console), since the host has no route to it.
    if (i.isolated)
      await waitFor(
        `the sshd of ${i.name} to listen`,
        async () => {
          if (exited) throw new LabHostError(exited);
          return (
            (await sh("ip", ["netns", "exec", ns, "ss", "-ltnH", "sport = :22"], { allowFail: true })).trim() !== ""
          );
        },
        BOOT_DEADLINE_MS,
      );
    else await waitForBanner(address, 22, "SSH-2.0-", BOOT_DEADLINE_MS, () => exited);
  } catch (e) {
    const boot = existsSync(join(dir, "boot.log")) ? readFileSync(join(dir, "boot.log"), "utf8").slice(-2000) : "";
    await destroyMachine(i);
    throw new LabHostError(`machine ${i.name} did not boot: ${(e as Error).message}\n${boot}`);
  }
  return { id: `${i.lab}/${i.name}`, outs: { ...i, address, netns: ns, sshPort: 22 } };
}

/**
 * The `ip rule` that refuses etcd's ports to connections from the gateway (the host): what a
 * security group admitting 2379-2380 from the subnet's machines (and the subnet's load
 * balancer, lb.ts labLbSourceAddress) but not from outside looks like in a machine.
 */
export function etcdRefusalRule(gateway: string): string[] {
  return ["rule", "add", "pref", "10", "from", gateway, "ipproto", "tcp", "dport", "2379-2380", "prohibit"];
}

async function refuseEtcdFromGateway(ns: string, gateway: string): Promise<void> {
  await sh("ip", ["-n", ns, "rule", "add", "pref", "100", "lookup", "local"]);
  await sh("ip", ["-n", ns, "rule", "del", "pref", "0"]);
  await sh("ip", ["-n", ns, ...etcdRefusalRule(gateway)]);
}

/**
 * Plugs a running machine into a second bridge as eth1 with `address` (a dual-homed
 * machine, such as a bastion between the host's bridge and an isolated one). The pair goes
 * with the machine's namespace.
 */
export async function addInterface(
  i: Pick<LabMachineInputs, "lab" | "name">,
  bridge: string,
  address: string,
  bits: number,
): Promise<void> {
  const ns = netnsName(i.lab, i.name);
  const hostIf = ifaceName("h", `${i.name}/eth1`);
  const peerIf = ifaceName("p", `${i.name}/eth1`);
  await sh("ip", ["link", "add", hostIf, "type", "veth", "peer", "name", peerIf]);
  await sh("ip", ["link", "set", peerIf, "netns", ns]);
  await sh("ip", ["link", "set", hostIf, "master", bridge, "up"]);
  await sh("ip", ["-n", ns, "link", "set", peerIf, "name", "eth1"]);
  await sh("ip", ["-n", ns, "link", "set", "eth1", "address", macFor(address)]);
  await sh("ip", ["-n", ns, "addr", "add", `${address}/${bits}`, "dev", "eth1"]);
  await sh("ip", ["-n", ns, "link", "set", "eth1", "up"]);
}

export async function remove(i: LabMachineInputs): Promise<void> {
  assertRoot();
  await destroyMachine(i);
}

/** Is the machine still running (its sshd holds the namespaces)? */
export async function alive(i: LabMachineInputs): Promise<boolean> {
  const ns = netnsName(i.lab, i.name);
  return existsSync(join("/run/netns", ns)) && (await netnsPids(ns)).length > 0;
}
