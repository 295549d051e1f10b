// A "foreign" cluster for adoption tests, made WITHOUT molt's code path (no stack, no
// Pulumi program, none of molt's bootstrap scripts): lab machines and an HAProxy made by
// calling the lab's plain functions (infra/lab/machine-impl.ts, lb-impl.ts), bootstrapped
// over SSH with the system's OpenSSH client the way an installer would:
//   - etcd only: a CA made here, member certificates on each node, a static 3-member
//     bootstrap (initial-cluster-state new), kubeadm's paths;
//   - Kubernetes: plain kubeadm, `kubeadm init --upload-certs` on the first node, then
//     `kubeadm join --control-plane --certificate-key` on the others, through the LB
//     (KubeOne copies the PKI over SSH instead, and switches features on that need files
//     on the hosts: test/support/kubeone-foreign.ts, built on createForeignMachines).
// Everything it writes on a machine is under the machine's own paths (/etc/kubernetes,
// /var/lib/etcd, /var/log/molt: infra/lab/machine-impl.ts MACHINE_PATHS), never the host's.
// Optionally the nodes sit on an isolated bridge (the host has no address on it), reached
// only through a dual-homed bastion machine with its own pinned sshd; the cluster's HAProxy
// then runs in the bastion's namespace (an LB in front of a private subnet).
// It also writes what KubeOne's terraform (examples/terraform/<cloud>/output.tf) would output for it.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureIsolatedBridge, parseSubnet } from "../../infra/lab/host";
import { attach, createLb, detach, removeLb } from "../../infra/lab/lb-impl";
import type { LabLbInputs } from "../../infra/lab/lb";
import { addInterface, create as createMachine, remove as removeMachine } from "../../infra/lab/machine-impl";
import type { LabMachineInputs } from "../../infra/lab/machine";
import type { LabSettings } from "../../infra/lab/settings";
import { generateSshKeyPair } from "../../infra/remote/ssh";
import { startAgent, type TestAgent } from "./sshd";

export interface ForeignNode {
  name: string;
  address: string;
  hostKey: string;
  machine: LabMachineInputs;
}

export interface ForeignCluster {
  nodes: ForeignNode[];
  kubernetes: boolean;
  /** The bastion: its address on the host's bridge and its pinned host key. */
  bastion?: { address: string; privateAddress: string; hostKey: string; netns: string; machine: LabMachineInputs };
  /** The cluster's HAProxy: the endpoint the nodes use, and one the host can reach. */
  lb?: { inputs: LabLbInputs; endpoint: string; hostEndpoint: string };
  /** The installer's SSH key, in an ssh-agent (authorized on every node and the bastion). */
  agent: TestAgent;
  operatorKey: { privateKey: string; publicKey: string };
  clusterName: string;
  /** Runs a command on a node (OpenSSH, through the bastion when there is one). */
  ssh(node: string, command: string, stdin?: string): Promise<string>;
  /** known_hosts lines of every node (and the bastion). */
  knownHosts(): string;
  /** KubeOne's `terraform output -json` for this cluster. */
  terraformOutput(o?: { withHostKeys?: boolean }): string;
  destroy(): Promise<void>;
}

export interface ForeignOptions {
  /** Where the nodes live; with a bastion its bridge is isolated. */
  lab: LabSettings;
  /** The host's side of the bastion; absent: the nodes are directly on `lab`'s bridge. */
  bastionLab?: LabSettings;
  image: string;
  names: string[];
  clusterName: string;
  kubernetes: boolean;
  /** Another cluster of the same installer on the same private bridge: its bastion and key. */
  viaBastionOf?: ForeignCluster;
  /**
   * etcd only: a VIP the installer's keepalived will move (test/support/kubeone-vip.ts) is the
   * cluster's client endpoint: every member listens on it and its certificate names it.
   */
  clientVip?: string;
}

function run(cmd: string, args: string[], stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 32 << 20 }, (err, stdout, stderr) =>
      err
        ? reject(new Error(`${cmd} ${args.slice(-2).join(" ")}: ${(stderr || err.message).trim()}`))
        : resolve(stdout),
    );
    // A command that does not read its stdin may close it first: not an error.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(stdin ?? "");
  });
}

/** What createForeignMachines makes: the machines, bastion and LB, nothing bootstrapped yet. */
export interface ForeignMachines extends Omit<ForeignCluster, "kubernetes"> {
  /**
   * Makes one more machine on the nodes' bridge (a VM the installer did not set up: no
   * cluster files, not in the LB nor in the terraform output), reachable with ssh(); of the
   * cluster's image unless `image` names another.
   */
  addMachine(name: string, image?: string): Promise<ForeignNode>;
  /** The machines made by addMachine. */
  spares: ForeignNode[];
}

export interface ForeignMachinesOptions extends Omit<ForeignOptions, "kubernetes"> {
  /** Make the cluster's HAProxy (in the bastion's namespace when there is one). */
  loadBalancer: boolean;
}

/**
 * The machines of a foreign cluster, its bastion and its HAProxy (empty: no server attached),
 * with an OpenSSH client set up for them; bootstrapping is the caller's (createForeignCluster,
 * test/support/kubeone-foreign.ts).
 */
export async function createForeignMachines(o: ForeignMachinesOptions): Promise<ForeignMachines> {
  const parent = o.viaBastionOf;
  const operator = parent?.operatorKey ?? generateSshKeyPair("operator@installer");
  const agent = parent?.agent ?? startAgent(operator.privateKey);
  const dir = mkdtempSync(join(tmpdir(), "molt-foreign-"));
  const sub = parseSubnet(o.lab.subnet);
  const made: LabMachineInputs[] = [];
  let lb: ForeignCluster["lb"];
  let bastion: ForeignCluster["bastion"] = parent?.bastion;
  const machine = (lab: LabSettings, name: string, isolated: boolean): LabMachineInputs => {
    const hk = generateSshKeyPair(`host key of ${name}`);
    return {
      lab: lab.lab,
      labRoot: lab.labRoot,
      bridge: lab.bridge,
      subnet: lab.subnet,
      name,
      image: o.image,
      hostPrivateKey: hk.privateKey,
      hostPublicKey: hk.publicKey,
      authorizedKey: operator.publicKey,
      ...(isolated ? { isolated: true } : {}),
    };
  };
  const nodes: ForeignNode[] = [];
  const spares: ForeignNode[] = [];
  const destroy = async () => {
    if (lb) await removeLb(lb.inputs).catch(() => undefined);
    for (const m of made.reverse()) await removeMachine(m).catch(() => undefined);
    if (!parent) agent.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  const knownHosts = (all: boolean) =>
    [
      ...(bastion ? [`${bastion.address} ${bastion.hostKey}`] : []),
      ...[...nodes, ...(all ? spares : [])].map((n) => `${n.address} ${n.hostKey}`),
    ]
      .join("\n")
      .concat("\n");
  const makeNode = async (name: string, image = o.image): Promise<ForeignNode> => {
    const m = { ...machine(o.lab, name, !!bastion), image };
    made.push(m);
    const outs = (await createMachine(m)).outs;
    return { name, address: outs.address, hostKey: m.hostPublicKey, machine: m };
  };
  try {
    if (o.bastionLab && !parent) {
      // Interface names derive from machine names alone: the lab's name keeps this one unique.
      const b = { ...machine(o.bastionLab, `${o.bastionLab.lab}-bastion`, false), image: "lab-v1" };
      made.push(b);
      const outs = (await createMachine(b)).outs;
      const privateAddress = `${sub.prefix}.2`;
      // The bastion's second leg is on the isolated bridge; its sshd listens on its first only.
      await ensureIsolatedBridge(o.lab.bridge);
      await addInterface(b, o.lab.bridge, privateAddress, sub.bits);
      bastion = { address: outs.address, privateAddress, hostKey: b.hostPublicKey, netns: outs.netns, machine: b };
    }
    for (const name of o.names) nodes.push(await makeNode(name));
    writeFileSync(join(dir, "known_hosts"), knownHosts(true));
    writeFileSync(
      join(dir, "ssh_config"),
      [
        "Host *",
        "  User root",
        `  UserKnownHostsFile ${join(dir, "known_hosts")}`,
        "  StrictHostKeyChecking yes",
        `  IdentityAgent ${agent.socket}`,
        "  BatchMode yes",
        "  ConnectTimeout 10",
        "",
      ].join("\n"),
    );
    const ssh = (node: string, command: string, stdin?: string) => {
      const n = [...nodes, ...spares].find((x) => x.name === node);
      if (!n) throw new Error(`no foreign node ${node}`);
      return run(
        "ssh",
        [
          "-F",
          join(dir, "ssh_config"),
          ...(bastion ? ["-J", `root@${bastion.address}`] : []),
          `root@${n.address}`,
          command,
        ],
        stdin,
      );
    };
    // The cluster's HAProxy: in front of the API servers; behind a bastion, in its namespace.
    if (o.loadBalancer) {
      const inputs: LabLbInputs = {
        lab: o.lab.lab,
        labRoot: o.lab.labRoot,
        bridge: o.lab.bridge,
        subnet: o.lab.subnet,
        port: 6443,
        ...(bastion ? { netns: bastion.netns, bind: "0.0.0.0" } : {}),
      };
      await createLb(inputs);
      const endpoint = bastion ? `${bastion.privateAddress}:6443` : `${sub.gateway}:6443`;
      lb = { inputs, endpoint, hostEndpoint: bastion ? `${bastion.address}:6443` : endpoint };
    }
    return {
      nodes,
      spares,
      ...(bastion ? { bastion } : {}),
      ...(lb ? { lb } : {}),
      agent,
      operatorKey: operator,
      clusterName: o.clusterName,
      ssh,
      knownHosts: () => knownHosts(false),
      terraformOutput: (t = {}) =>
        kubeoneOutput({
          clusterName: o.clusterName,
          endpoint: lb?.endpoint ?? `${sub.gateway}:6443`,
          nodes,
          ...(bastion ? { bastion: bastion.address } : {}),
          withHostKeys: !!t.withHostKeys,
        }),
      addMachine: async (name, image) => {
        const n = await makeNode(name, image);
        spares.push(n);
        writeFileSync(join(dir, "known_hosts"), knownHosts(true));
        return n;
      },
      destroy,
    };
  } catch (e) {
    await destroy();
    throw e;
  }
}

export async function createForeignCluster(o: ForeignOptions): Promise<ForeignCluster> {
  const { kubernetes, ...rest } = o;
  // An etcd-only cluster behind its own bastion has an LB too: molt attaches its new nodes to it.
  const m = await createForeignMachines({ ...rest, loadBalancer: kubernetes || (!!o.bastionLab && !o.viaBastionOf) });
  try {
    if (kubernetes && m.lb) {
      for (const n of m.nodes) await attach({ lb: m.lb.inputs, server: n.name, address: n.address, port: 6443 });
      await bootstrapKubernetes(m.nodes, m.lb, o.clusterName, m.ssh);
    } else {
      await bootstrapEtcd(m.nodes, m.ssh, o.clientVip);
    }
  } catch (e) {
    await m.destroy();
    throw e;
  }
  const { addMachine: _a, spares: _s, ...cluster } = m;
  return { ...cluster, kubernetes };
}

/** The servers the cluster's HAProxy lists (what molt attached and detached). */
export function lbServers(c: ForeignCluster): string[] {
  if (!c.lb) return [];
  const d = join(c.lb.inputs.labRoot, "labs", c.lb.inputs.lab, "lb", "servers");
  return existsSync(d) ? readdirSync(d).sort() : [];
}
export { detach as detachFromLb };

/** What the output.tf of KubeOne's terraform examples makes `terraform output -json` print. */
function kubeoneOutput(o: {
  clusterName: string;
  endpoint: string;
  nodes: ForeignNode[];
  bastion?: string;
  withHostKeys: boolean;
}): string {
  const wrap = (value: unknown) => ({ sensitive: false, type: ["object", {}], value });
  return JSON.stringify(
    {
      kubeone_api: wrap({ endpoint: o.endpoint, apiserver_alternative_names: [] }),
      kubeone_hosts: wrap({
        control_plane: {
          cluster_name: o.clusterName,
          cloud_provider: "none",
          private_address: o.nodes.map((n) => n.address),
          hostnames: o.nodes.map((n) => n.name),
          operating_system: "debian",
          ssh_agent_socket: "env:SSH_AUTH_SOCK",
          ssh_port: 22,
          ssh_private_key_file: "",
          ssh_user: "root",
          ssh_hosts_keys: o.withHostKeys ? o.nodes.map((n) => n.hostKey) : null,
          bastion: o.bastion ?? "",
          bastion_port: 22,
          bastion_user: "root",
          bastion_host_key: null,
          labels: {},
        },
      }),
      ssh_commands: wrap(
        o.nodes.map((n) => (o.bastion ? `ssh -J root@${o.bastion} root@${n.address}` : `ssh root@${n.address}`)),
      ),
    },
    null,
    2,
  );
}

/** A 3-member etcd bootstrapped statically, with kubeadm's paths (what stacked etcd looks like on disk). */
async function bootstrapEtcd(
  nodes: ForeignNode[],
  ssh: (node: string, cmd: string, stdin?: string) => Promise<string>,
  clientVip?: string,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "molt-foreign-ca-"));
  let ca: string;
  try {
    await run("openssl", [
      "genpkey",
      "-algorithm",
      "EC",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-out",
      join(dir, "ca.key"),
    ]);
    await run("openssl", [
      "req",
      "-x509",
      "-new",
      "-key",
      join(dir, "ca.key"),
      "-subj",
      "/CN=etcd-ca",
      "-days",
      "365",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
      "-out",
      join(dir, "ca.crt"),
    ]);
    ca = readFileSync(join(dir, "ca.crt"), "utf8") + readFileSync(join(dir, "ca.key"), "utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const cluster = nodes.map((n) => `${n.name}=https://${n.address}:2380`).join(",");
  await Promise.all(
    nodes.map((n) =>
      ssh(
        n.name,
        "bash -s",
        `set -euo pipefail
PKI=/etc/kubernetes/pki/etcd
mkdir -p $PKI /var/lib/etcd /var/log/molt
chmod 700 /var/lib/etcd
umask 077
awk '/BEGIN CERTIFICATE/,/END CERTIFICATE/' > $PKI/ca.crt <<'CA'
${ca}CA
awk '/BEGIN .*PRIVATE KEY/,/END .*PRIVATE KEY/' > $PKI/ca.key <<'CA'
${ca}CA
cert() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $PKI/$1.key 2>/dev/null
  openssl req -new -key $PKI/$1.key -subj "/O=$3/CN=$2" -out $PKI/$1.csr 2>/dev/null
  printf 'keyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=%s\\n%s\\n' "$4" "$5" > $PKI/$1.ext
  openssl x509 -req -in $PKI/$1.csr -CA $PKI/ca.crt -CAkey $PKI/ca.key -CAcreateserial -days 365 -sha256 \\
    -extfile $PKI/$1.ext -out $PKI/$1.crt 2>/dev/null
  rm -f $PKI/$1.csr $PKI/$1.ext
}
SANS="subjectAltName=DNS:${n.name},DNS:localhost,IP:${n.address},IP:127.0.0.1${clientVip ? `,IP:${clientVip}` : ""}"
${
  // The lab machine refuses etcd's ports to the host; through the VIP they answer (a client's way in).
  clientVip
    ? `ip rule show pref 5 | grep -q . || ip rule add pref 5 to ${clientVip}/32 ipproto tcp dport 2379 lookup local`
    : ""
}
cert server ${n.name} "" serverAuth,clientAuth "$SANS"
cert peer ${n.name} "" serverAuth,clientAuth "$SANS"
cert healthcheck-client kube-etcd-healthcheck-client system:masters clientAuth ""
setsid /usr/local/bin/etcd --name ${n.name} --data-dir /var/lib/etcd \\
  --listen-client-urls ${clientVip ? "https://0.0.0.0:2379" : `https://127.0.0.1:2379,https://${n.address}:2379`} \\
  --advertise-client-urls https://${n.address}:2379 \\
  --listen-peer-urls https://${n.address}:2380 --initial-advertise-peer-urls https://${n.address}:2380 \\
  --initial-cluster ${cluster} --initial-cluster-state new --initial-cluster-token installer \\
  --cert-file $PKI/server.crt --key-file $PKI/server.key --client-cert-auth --trusted-ca-file $PKI/ca.crt \\
  --peer-cert-file $PKI/peer.crt --peer-key-file $PKI/peer.key --peer-client-cert-auth \\
  --peer-trusted-ca-file $PKI/ca.crt \\
  >>/var/log/molt/installer-etcd.log 2>&1 </dev/null &
echo $! > /run/installer-etcd.pid
`,
      ),
    ),
  );
  const health = `for i in $(seq 1 150); do
  ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \\
    --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt --key=/etc/kubernetes/pki/etcd/healthcheck-client.key \\
    --command-timeout=2s endpoint health >/dev/null 2>&1 && exit 0
  sleep 0.2
done
echo "etcd did not become healthy; $(tail -n 5 /var/log/molt/installer-etcd.log)" >&2; exit 1`;
  for (const n of nodes) await ssh(n.name, health);
}

/** KubeOne's way: init with uploaded certificates on the first, join --control-plane on the others. */
async function bootstrapKubernetes(
  nodes: ForeignNode[],
  lb: NonNullable<ForeignCluster["lb"]>,
  clusterName: string,
  ssh: (node: string, cmd: string, stdin?: string) => Promise<string>,
): Promise<void> {
  const [first, ...rest] = nodes;
  const [lbHost] = lb.endpoint.split(":");
  const [hostLbHost] = lb.hostEndpoint.split(":");
  // The lab machine's container runtime is lab-kubelet: no image pulls, no preflight.
  const registration = (n: ForeignNode) => `nodeRegistration:
  name: ${n.name}
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: Never`;
  // The API server's certificate names the node's address (kubeadm's advertise address), not 127.0.0.1.
  const ready = (n: ForeignNode) =>
    `for i in $(seq 1 600); do curl -fsS --cacert /etc/kubernetes/pki/ca.crt https://${n.address}:6443/readyz ` +
    `>/dev/null 2>&1 && exit 0; sleep 0.5; done; echo "kube-apiserver not ready" >&2; exit 1`;
  const certificateKey = (await ssh(first.name, "kubeadm certs certificate-key")).trim();
  await ssh(
    first.name,
    "bash -s",
    `set -euo pipefail
mkdir -p /etc/kubernetes/manifests /var/log/molt
cat > /etc/kubernetes/installer-init.yaml <<CFG
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
certificateKey: "${certificateKey}"
localAPIEndpoint:
  advertiseAddress: ${first.address}
  bindPort: 6443
${registration(first)}
skipPhases:
- preflight
- kubelet-finalize
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: ${clusterName}
kubernetesVersion: $(kubeadm version -o short)
controlPlaneEndpoint: "${lb.endpoint}"
apiServer:
  certSANs: ["${lbHost}", "${hostLbHost}"]
networking:
  serviceSubnet: 10.96.0.0/12
  podSubnet: 10.244.0.0/16
etcd:
  local:
    dataDir: /var/lib/etcd
CFG
kubeadm init --config /etc/kubernetes/installer-init.yaml --upload-certs --skip-token-print \\
  >/var/log/molt/installer-kubeadm.log 2>&1 || { tail -n 20 /var/log/molt/installer-kubeadm.log >&2; exit 1; }
${ready(first)}
`,
  );
  for (const n of rest) {
    const token = (await ssh(first.name, "kubeadm token create --ttl 30m")).trim();
    const hash = (
      await ssh(
        first.name,
        "openssl x509 -pubkey -noout -in /etc/kubernetes/pki/ca.crt | openssl pkey -pubin -outform der 2>/dev/null " +
          "| sha256sum | cut -d' ' -f1",
      )
    ).trim();
    await ssh(
      n.name,
      "bash -s",
      `set -euo pipefail
mkdir -p /etc/kubernetes/manifests /var/log/molt
cat > /etc/kubernetes/installer-join.yaml <<CFG
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "${lb.endpoint}"
    token: "${token}"
    caCertHashes: ["sha256:${hash}"]
${registration(n)}
controlPlane:
  certificateKey: "${certificateKey}"
  localAPIEndpoint:
    advertiseAddress: ${n.address}
    bindPort: 6443
skipPhases:
- preflight
CFG
kubeadm join --config /etc/kubernetes/installer-join.yaml >/var/log/molt/installer-kubeadm.log 2>&1 ||
  { tail -n 20 /var/log/molt/installer-kubeadm.log >&2; exit 1; }
rm -f /etc/kubernetes/installer-join.yaml
${ready(n)}
`,
    );
  }
}
