// The raw-work baseline of the bench: the same steps as molt's etcd roll, done directly
// with no molt and no engine, on a cluster molt made. Per replaced node, in molt's order:
// boot a lab machine (infra/lab/machine-impl.ts, the code the engine's provider runs),
// attach it to the lab's HAProxy (lb-impl.ts), read the join material on the oldest other
// node and run the lab's join script on the new one (it adds the member as a learner,
// waits for catch-up and promotes it); then hand leadership over if the old node leads,
// remove its member, run the reset script on it, detach it and stop its machine. SSH
// sessions stay open, as molt's do. Nothing waits but the steps themselves.
import { parseSubnet } from "../infra/lab/host";
import { labLbInputs } from "../infra/lab/lb";
import { attach, detach } from "../infra/lab/lb-impl";
import { create as createMachine, remove as removeMachine } from "../infra/lab/machine-impl";
import type { LabMachineInputs } from "../infra/lab/machine";
import { JOIN_BUNDLE } from "../infra/lab/join-material";
import { labScript } from "../infra/lab/node";
import { type LabSettings } from "../infra/lab/settings";
import { commandLine } from "../infra/remote/command-impl";
import { generateSshKeyPair, SshSession } from "../infra/remote/ssh";
import { pollUntil } from "../lib/poll";
import type { RawKube } from "./raw-kube";

export interface RawNode {
  name: string;
  address: string;
  hostKey: string;
}

export interface RawStepTimes {
  node: string;
  replaced: string;
  /** Machine booted (sshd answers). */
  bootMs: number;
  attachMs: number;
  /** Join material read on the seed + join script (learner, catch-up, promote; kubeadm join). */
  joinMs: number;
  /** Kubernetes: controller-manager, scheduler and Node Ready after the join. */
  kubeReadyMs?: number;
  /** Kubernetes: the old node drained and its API server stopped, before its member is removed. */
  kubeRetireMs?: number;
  /** Kubernetes: its Node deleted after its machine. */
  deleteNodeMs?: number;
  /** Move-leader (when the old node led) + member remove. */
  membershipMs: number;
  resetMs: number;
  detachMs: number;
  stopMs: number;
  surgeMs: number;
  pruneMs: number;
}

const PKI = "/etc/kubernetes/pki/etcd";
const etcdctl = (endpoints: string, args: string) =>
  `ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints=${endpoints} --cacert=${PKI}/ca.crt ` +
  `--cert=${PKI}/healthcheck-client.crt --key=${PKI}/healthcheck-client.key ${args}`;

/** Member and leader ids (hex) from `endpoint status -w json`: uint64s, so read as text, never as JSON numbers. */
function idsOf(json: string): { member: string; leader: string } {
  const member = /"member_id":(\d+)/.exec(json)?.[1];
  const leader = /"leader":(\d+)/.exec(json)?.[1];
  if (!member || !leader) throw new Error(`no member id / leader in etcdctl's status: ${json.slice(0, 200)}`);
  return { member: BigInt(member).toString(16), leader: BigInt(leader).toString(16) };
}

export async function rawRoll(o: {
  lab: LabSettings;
  nodes: RawNode[];
  image: string;
  clientPrivateKey: string;
  deadlineSeconds: number;
  /** Names of the new nodes, one per replaced node. */
  names: string[];
  /** Kubernetes images: the steps around kubeadm join and reset (bench/raw-kube.ts). */
  kube?: RawKube;
}): Promise<{ wallMs: number; steps: RawStepTimes[]; addonsMs?: number }> {
  const sessions = new Map<string, SshSession>();
  const connect = async (n: RawNode) => {
    let s = sessions.get(n.name);
    if (!s?.open) {
      s = await SshSession.connect({
        host: n.address,
        port: 22,
        user: "root",
        privateKey: o.clientPrivateKey,
        hostKey: n.hostKey,
      });
      sessions.set(n.name, s);
    }
    return s;
  };
  const firstSession = await connect(o.nodes[0]);
  const authorizedKey = (await firstSession.run("cat /root/.ssh/authorized_keys", "authorized key")).trim();
  const lb = labLbInputs(o.lab);
  const machineOf = (name: string, hostKey: { privateKey: string; publicKey: string }): LabMachineInputs => ({
    lab: o.lab.lab,
    labRoot: o.lab.labRoot,
    bridge: o.lab.bridge,
    subnet: o.lab.subnet,
    name,
    image: o.image,
    hostPrivateKey: hostKey.privateKey,
    hostPublicKey: hostKey.publicKey,
    authorizedKey,
  });
  const current = [...o.nodes];
  const steps: RawStepTimes[] = [];
  const t0 = Date.now();
  try {
    await o.kube?.beforeFirstJoin();
    for (const [i, old] of o.nodes.entries()) {
      const name = o.names[i];
      const ts = Date.now();
      // Surge: boot, attach, join (as the engine's provider does, in the same order).
      const hostKey = generateSshKeyPair(`host key of ${name}`);
      const machine = await createMachine(machineOf(name, hostKey));
      const fresh: RawNode = { name, address: machine.outs.address, hostKey: hostKey.publicKey };
      const tBoot = Date.now();
      await attach({ lb, server: name, address: fresh.address, port: 6443 });
      const tAttach = Date.now();
      const seed = current[0];
      const material = await (await connect(seed)).run(JOIN_BUNDLE, `join material on ${seed.name}`);
      const joined = await (
        await connect(fresh)
      ).exec(
        commandLine(
          {
            environment: {
              NODE_NAME: name,
              NODE_IP: fresh.address,
              DEADLINE_SECONDS: String(o.deadlineSeconds),
              JOIN_ENDPOINTS: current.map((n) => `https://${n.address}:2379`).join(","),
              LB_ENDPOINT: `${lb.bind ?? parseSubnet(o.lab.subnet).gateway}:${lb.port}`,
              CLUSTER_NAME: o.lab.lab,
            },
          },
          labScript("join"),
        ),
        { stdin: material },
      );
      if (joined.code !== 0) throw new Error(`raw join of ${name} failed: ${joined.stderr.slice(-800)}`);
      current.push(fresh);
      const tJoined = Date.now();
      await o.kube?.afterJoin(name, await connect(fresh));
      const tJoin = Date.now();
      await o.kube?.beforeRemove(old.name, await connect(old));
      const tRetired = Date.now();

      // Retire the old node: leadership away from it, its member removed (through the new node).
      const viaNew = await connect(fresh);
      const oldStatus = idsOf(
        await (await connect(old)).run(etcdctl("https://127.0.0.1:2379", "endpoint status -w json"), "status"),
      );
      const oldId = oldStatus.member;
      if (oldStatus.leader === oldStatus.member) {
        const newId = idsOf(
          await viaNew.run(etcdctl("https://127.0.0.1:2379", "endpoint status -w json"), "status"),
        ).member;
        await (
          await connect(old)
        ).run(etcdctl("https://127.0.0.1:2379", `move-leader ${newId}`), `move-leader to ${name}`);
      }
      // etcd refuses a removal ("unhealthy cluster") until the new member has been active
      // for a moment: asked again until it is accepted, as molt's own removal is.
      await pollUntil(
        async () => {
          const r = await viaNew.exec(etcdctl("https://127.0.0.1:2379", `member remove ${oldId}`));
          if (r.code === 0) return true;
          if (!/unhealthy cluster/.test(r.stderr))
            throw new Error(`member remove ${old.name}: ${r.stderr.slice(-400)}`);
          return undefined;
        },
        { what: `etcd to accept the removal of ${old.name}`, deadlineMs: 60_000, maxIntervalMs: 200 },
      );
      const tMember = Date.now();
      const tp = Date.now();
      const reset = await (
        await connect(old)
      ).exec(commandLine({ environment: { NODE_NAME: old.name, NODE_IP: old.address } }, labScript("reset")));
      if (reset.code !== 0) throw new Error(`raw reset of ${old.name} failed: ${reset.stderr.slice(-800)}`);
      sessions.get(old.name)?.close();
      sessions.delete(old.name);
      const tReset = Date.now();
      await detach({ lb, server: old.name, address: old.address, port: 6443 });
      const tDetach = Date.now();
      await removeMachine(machineOf(old.name, { privateKey: "", publicKey: "" }));
      const tStop = Date.now();
      await o.kube?.afterStop(old.name);
      const tDeleted = Date.now();
      current.splice(current.indexOf(old), 1);
      steps.push({
        node: name,
        replaced: old.name,
        bootMs: tBoot - ts,
        attachMs: tAttach - tBoot,
        joinMs: tJoined - tAttach,
        ...(o.kube
          ? { kubeReadyMs: tJoin - tJoined, kubeRetireMs: tRetired - tJoin, deleteNodeMs: tDeleted - tStop }
          : {}),
        membershipMs: tMember - tRetired,
        resetMs: tReset - tp,
        detachMs: tDetach - tReset,
        stopMs: tStop - tDetach,
        surgeMs: tJoin - ts,
        pruneMs: tDeleted - tp,
      });
    }
    const tEnd = Date.now();
    await o.kube?.atEnd(await connect(current[current.length - 1]));
    return { wallMs: Date.now() - t0, steps, ...(o.kube ? { addonsMs: Date.now() - tEnd } : {}) };
  } finally {
    for (const s of sessions.values()) s.close();
  }
}
