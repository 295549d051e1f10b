// The floor of the bench (issue #30): the irreducible work of molt's etcd roll or Kubernetes
// upgrade, done directly with no molt and no engine, on a cluster molt made. Per replaced
// node, in molt's safety order: boot a lab machine (infra/lab/machine-impl.ts, the code the
// engine's provider runs) while the join material is read on a healthy node (and, before the
// first join, kubeadm-config names the new version); attach it to the lab's HAProxy
// (lb-impl.ts); run the lab's join script (learner, catch-up, promote; kubeadm join); with
// Kubernetes, the new node's controller-manager, scheduler and Node Ready; then the old node
// drained and its API server stopped (bench/raw-kube.ts), leadership handed over if it leads,
// its member removed; then its machine destroyed and detached from the load balancer at once,
// with no reset (a destroyed machine needs none), and its Node deleted; that prune overlaps
// the next node's boot, as etcd allows once the member is gone. SSH sessions stay open, as
// molt's do. Nothing waits but the steps themselves.
import { parseSubnet } from "../infra/lab/host";
import { labLbInputs } from "../infra/lab/lb";
import { attach, detach } from "../infra/lab/lb-impl";
import { create as createMachine, machineDir, remove as removeMachine } from "../infra/lab/machine-impl";
import type { LabMachineInputs } from "../infra/lab/machine";
import { JOIN_BUNDLE } from "../infra/lab/join-material";
import { labScript } from "../infra/lab/node";
import { type LabSettings } from "../infra/lab/settings";
import { commandLine } from "../infra/remote/command-impl";
import { generateSshKeyPair, SshSession } from "../infra/remote/ssh";
import { pollUntil } from "../lib/poll";
import type { RawKube } from "./raw-kube";
import { readJoinMarks } from "./surge-phases";

export interface RawNode {
  name: string;
  address: string;
  hostKey: string;
}

export interface RawStepTimes {
  node: string;
  replaced: string;
  /** Machine booted (sshd answers); the join material is read on a healthy node meanwhile. */
  bootMs: number;
  attachMs: number;
  /** The join script: learner added, caught up and promoted (kubeadm join with Kubernetes). */
  joinMs: number;
  /** Kubernetes: controller-manager, scheduler and Node Ready after the join. */
  kubeReadyMs?: number;
  /** Kubernetes: the old node drained (cordon, evictions, its pods gone). */
  drainMs?: number;
  /** Kubernetes: its API server stopped (manifest moved aside, nothing listening on 6443). */
  apiStopMs?: number;
  /** Move-leader (when the old node led) + member remove. */
  membershipMs: number;
  /** LB detach and machine destroy, at once (no reset). */
  destroyMs: number;
  /** Kubernetes: its Node deleted after its machine. */
  deleteNodeMs?: number;
  /** Boot through the new node ready (the surge). */
  surgeMs: number;
  /** Drain through the member removed (the retirement). */
  retireMs: number;
  /** Destroy through its Node deleted (the prune; it overlaps the next node's boot). */
  pruneMs: number;
  /**
   * The new etcd member's publishes that timed out before the one that worked (read from its
   * log, bench/surge-phases.ts): each is etcd's request timeout, 7 s with the defaults
   * (docs/benchmarks.md, "The new etcd member's 7 s"). Absent when its log shows no publish.
   */
  publishFailures?: number;
  /**
   * What those timeouts cost: its publish that worked, after its snapshot was applied (0
   * without a timeout; it publishes right after the snapshot then).
   */
  publishWaitMs?: number;
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
  /** Called as each new node's surge starts (the bench probe watches it from then on). */
  onSurge?: (name: string) => void;
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
  // The previous node's prune (destroy, detach, Node deleted), running while the next node boots.
  let pruning: Promise<void> = Promise.resolve();
  const t0 = Date.now();
  try {
    for (const [i, old] of o.nodes.entries()) {
      const name = o.names[i];
      o.onSurge?.(name);
      const ts = Date.now();
      // Surge: boot while the join material is read (and kubeadm-config set, before the first join).
      const hostKey = generateSshKeyPair(`host key of ${name}`);
      const seed = current[0];
      const [machine, material] = await Promise.all([
        createMachine(machineOf(name, hostKey)),
        connect(seed).then((s) => s.run(JOIN_BUNDLE, `join material on ${seed.name}`)),
        i === 0 ? o.kube?.beforeFirstJoin() : undefined,
      ]);
      const fresh: RawNode = { name, address: machine.outs.address, hostKey: hostKey.publicKey };
      const tBoot = Date.now();
      await attach({ lb, server: name, address: fresh.address, port: 6443 });
      const tAttach = Date.now();
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
      const tReady = Date.now();
      // Read off the clock (the surge's time is taken): the new member's publishes.
      const etcdMarks = readJoinMarks(machineDir({ labRoot: o.lab.labRoot, lab: o.lab.lab, name })).etcd;
      // The previous node's prune has had the whole surge to finish.
      await pruning;
      const tr = Date.now();
      await o.kube?.drain(old.name);
      const tDrained = Date.now();
      await o.kube?.stopApiServer(old.name, await connect(old));
      const tStopped = Date.now();

      // Leadership away from it, its member removed (through the new node).
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
      sessions.get(old.name)?.close();
      sessions.delete(old.name);
      current.splice(current.indexOf(old), 1);
      // The prune: no reset of a machine that is destroyed; detach and destroy at once, then its Node.
      const step: RawStepTimes = {
        node: name,
        replaced: old.name,
        bootMs: tBoot - ts,
        attachMs: tAttach - tBoot,
        joinMs: tJoined - tAttach,
        ...(o.kube ? { kubeReadyMs: tReady - tJoined, drainMs: tDrained - tr, apiStopMs: tStopped - tDrained } : {}),
        membershipMs: tMember - tStopped,
        destroyMs: 0,
        surgeMs: tReady - ts,
        retireMs: tMember - tr,
        pruneMs: 0,
        ...(etcdMarks?.published !== undefined
          ? {
              publishFailures: etcdMarks.publishFailures ?? 0,
              publishWaitMs:
                etcdMarks.publishFailures && etcdMarks.snapshotApplied !== undefined
                  ? etcdMarks.published - etcdMarks.snapshotApplied
                  : 0,
            }
          : {}),
      };
      steps.push(step);
      pruning = (async () => {
        const tp = Date.now();
        await Promise.all([
          detach({ lb, server: old.name, address: old.address, port: 6443 }),
          removeMachine(machineOf(old.name, { privateKey: "", publicKey: "" })),
        ]);
        const tDestroyed = Date.now();
        await o.kube?.afterStop(old.name);
        step.destroyMs = tDestroyed - tp;
        if (o.kube) step.deleteNodeMs = Date.now() - tDestroyed;
        step.pruneMs = Date.now() - tp;
      })();
      // Awaited before the next retirement (or at the end), where a failure surfaces.
      pruning.catch(() => undefined);
    }
    await pruning;
    const tEnd = Date.now();
    await o.kube?.atEnd(await connect(current[current.length - 1]));
    return { wallMs: Date.now() - t0, steps, ...(o.kube ? { addonsMs: Date.now() - tEnd } : {}) };
  } finally {
    for (const s of sessions.values()) s.close();
    o.kube?.close();
  }
}
