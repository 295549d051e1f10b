// `molt adopt`: a running cluster molt did not create (KubeOne, kubeadm by hand) becomes a
// stack whose node list holds "adopted" entries. Adoption changes nothing on the cluster: it
// checks, then records. Every check runs before anything is recorded, and a failed one
// refuses with its reason (exit 2). Host keys are never trusted silently.
import type { Stack } from "@pulumi/pulumi/automation";
import { ADOPTED_IMAGE } from "../../infra/adopted";
import type { NodeEndpoint, NodeEntry } from "../../infra/node";
import { buildProgram } from "../../infra/program";
import { accessFields } from "../../infra/remote/access";
import { fingerprintOf, scanHostKey, SshSession, type BastionTarget, type SshTarget } from "../../infra/remote/ssh";
import { loadStackConfig, resolveLabImage, type StackConfig } from "../config";
import { EtcdAccess, type EndpointStatus, type Member } from "../edges/etcd";
import { KubeAccess } from "../edges/kube";
import { acquireLock } from "../lock";
import { parseStoredState, readStoredState } from "../stack/state";
import { programInputFor } from "../program-input";
import { openStack, StackNotFoundError } from "../stack/driver";
import { checkProviderPlugins } from "../stack/plugins";
import { backendUrl, repoRoot } from "../stack/engine";
import type { ExpectedHostKeys } from "./host-keys";
import type { AdoptionHost, AdoptionInput } from "./input";
import { probeScript, parseProbe, type HostFacts } from "./probe";

export { InvalidAdoptionInputError, parseHostList, parseKubeOneOutput, type AdoptionInput } from "./input";
export { ExpectedHostKeys, InvalidHostKeyInputError } from "./host-keys";

/** A check failed: nothing was recorded (exit 2). */
export class AdoptionRefusedError extends Error {
  constructor(
    readonly stackName: string,
    readonly problems: string[],
  ) {
    super(
      `stack ${stackName}: the cluster cannot be adopted; nothing was recorded and nothing on the cluster was changed:\n` +
        problems.map((p) => `  - ${p}`).join("\n"),
    );
    this.name = "AdoptionRefusedError";
  }
}

export interface SeenHostKey {
  host: string;
  port: number;
  /** What presented it: "host" or "bastion". */
  role: "host" | "bastion";
  keyLine: string;
  fingerprint: string;
}

/** Host keys nobody named, not confirmed: nothing was recorded (exit 6). */
export class HostKeysNotConfirmedError extends Error {
  constructor(readonly seen: SeenHostKey[]) {
    super(
      "host keys not confirmed; nothing was recorded. molt saw:\n" +
        seen.map((k) => `  ${k.host}:${k.port}  ${k.keyLine.split(" ")[0]}  ${k.fingerprint}`).join("\n") +
        "\nCheck them on the machines (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then pass them: " +
        seen.map((k) => `--host-key ${k.host}${k.port === 22 ? "" : `:${k.port}`}=${k.fingerprint}`).join(" ") +
        " (or --known-hosts FILE)",
    );
    this.name = "HostKeysNotConfirmedError";
  }
}

export type AdoptEvent =
  | { type: "host-key"; host: string; port: number; fingerprint: string; trust: string }
  | { type: "check"; check: string; ok: true; detail: string }
  | { type: "recorded"; stack: string; nodes: AdoptedView[] };

export interface AdoptedView {
  name: string;
  address: string;
  ssh: string;
  etcdVersion: string;
  kubernetesVersion?: string;
  generation: number;
  leader: boolean;
}

export interface AdoptOptions {
  stack: string;
  workDir?: string;
  env?: Record<string, string>;
  input: AdoptionInput;
  hostKeys: ExpectedHostKeys;
  /** Asked with the host keys nobody named; true trusts exactly those. Absent: refuse (exit 6). */
  confirmHostKeys?: (seen: SeenHostKey[]) => Promise<boolean>;
  onEvent?: (e: AdoptEvent) => void;
}

export interface AdoptResult {
  stack: string;
  nodes: NodeEntry[];
  apiEndpoint?: string;
}

export async function adopt(o: AdoptOptions): Promise<AdoptResult> {
  const emit = (e: AdoptEvent) => o.onEvent?.(e);
  const workDir = o.workDir ?? process.env.MOLT_PROJECT_DIR ?? repoRoot;
  const cfg = resolveLabImage(loadStackConfig(workDir, o.stack));
  const refuse = (...problems: string[]): never => {
    throw new AdoptionRefusedError(o.stack, problems);
  };
  const backend = o.env?.PULUMI_BACKEND_URL ?? backendUrl();
  const lock = await acquireLock(backend, o.stack, "adopt", { ttlSeconds: cfg.lockSeconds, env: o.env });
  try {
    // 1. The stack must hold no node yet (it need not exist: it is created when recording).
    let stack: Stack | undefined;
    try {
      stack = await openStack({
        stackName: o.stack,
        workDir,
        env: o.env,
        create: false,
        program: buildProgram(programInputFor(cfg, [])),
      });
      const stored = await readStoredState(stack);
      if (stored.nodes.length)
        refuse(
          `stack ${o.stack} already holds nodes (${stored.nodes.map((n) => n.name).join(", ")}): adoption records a ` +
            "cluster into an empty stack only. Use another stack name, or roll this one with `molt rollout`",
        );
    } catch (e) {
      if (!(e instanceof StackNotFoundError)) throw e;
    }

    // 2. How molt will log in, and through which bastion: the stack's settings, which the
    // rollout uses later too; they must agree with what the installer says.
    const bastion = bastionOf(cfg, o.input, refuse);
    const credentials = accessFields(cfg.sshAccess, undefined);
    if (!credentials.agent)
      refuse(
        "molt has no SSH credential for hosts it did not create: set molt:ssh.agent: true in " +
          `${cfg.file} and load the installer's key into ssh-agent (ssh-add ${o.input.sshKeySource?.privateKeyFile ?? "KEYFILE"})`,
      );
    const login = (h: AdoptionHost): Omit<SshTarget, "hostKey"> => ({
      host: h.sshHost,
      port: h.sshPort,
      user: h.sshUser ?? cfg.sshUser,
      agent: true,
      ...(bastion ? { bastion } : {}),
    });

    // 3. Host keys: scanned without trust, compared with what the user named.
    const seen = await scanAll(o.input.hosts, bastion, refuse);
    const unknown: SeenHostKey[] = [];
    const wrong: string[] = [];
    for (const [h, keyLine] of seen) {
      const v = o.hostKeys.verdict(h.sshHost, h.sshPort, keyLine);
      const fp = fingerprintOf(keyLine);
      if (v.kind === "mismatch")
        wrong.push(
          `host ${h.sshHost}:${h.sshPort} presents ${fp}, but ${v.source} expects ${v.expected.join(" or ")}: ` +
            "a replaced machine, a wrong address, or someone in the middle",
        );
      else if (v.kind === "unknown")
        unknown.push({ host: h.sshHost, port: h.sshPort, role: "host", keyLine, fingerprint: fp });
      else emit({ type: "host-key", host: h.sshHost, port: h.sshPort, fingerprint: fp, trust: v.source });
    }
    if (wrong.length) refuse(...wrong);
    if (unknown.length) {
      if (!o.confirmHostKeys || !(await o.confirmHostKeys(unknown))) throw new HostKeysNotConfirmedError(unknown);
      for (const k of unknown)
        emit({ type: "host-key", host: k.host, port: k.port, fingerprint: k.fingerprint, trust: "confirmed" });
    }

    // 4. SSH with the pinned keys, and what each host runs.
    const endpoints: NodeEndpoint[] = o.input.hosts.map((h) => ({
      name: h.address,
      privateAddress: h.address,
      sshHost: h.sshHost,
      sshPort: h.sshPort,
      hostPublicKey: seen.get(h)!,
      providerId: "",
      sshUser: h.sshUser ?? cfg.sshUser,
    }));
    const facts = await probeAll(o.input.hosts, (h) => ({ ...login(h), hostKey: seen.get(h)! }), refuse);
    emit({ type: "check", check: "ssh", ok: true, detail: `${facts.size} hosts reachable with pinned host keys` });
    const kubernetes = cfg.intent.kubernetesVersion !== undefined;
    refuseUnless(stackedEtcdProblems(o.input.hosts, facts, kubernetes, cfg), refuse);

    // 5. etcd: members == hosts, all healthy, no alarm, one leader.
    let access: EtcdAccess | undefined;
    try {
      access = await EtcdAccess.open(endpoints, { user: cfg.sshUser, agent: true, ...(bastion ? { bastion } : {}) });
    } catch (e) {
      refuse(`etcd cannot be reached on any host: ${(e as Error).message}`);
    }
    try {
      const etcd = await observeEtcd(access!, o.input.hosts);
      refuseUnless(etcdProblems(o.input.hosts, etcd, access!.unreachable), refuse);
      emit({
        type: "check",
        check: "etcd",
        ok: true,
        detail: `${etcd.members.length} voting members == the hosts, healthy, no alarm, leader ${etcd.leaderName}`,
      });

      // 6. Kubernetes: the API endpoint answers; kubeadm-config names stacked etcd; Nodes.
      let kubeVersions: Record<string, string> = {};
      if (kubernetes) {
        kubeVersions = await kubeChecks(o.input, access!, etcd, refuse);
        emit({
          type: "check",
          check: "kubernetes",
          ok: true,
          detail: `API endpoint ${o.input.apiEndpoint} ready; kube-apiserver ${[...new Set(Object.values(kubeVersions))].join(", ")}`,
        });
      }

      // 7. Record: the leader last (retired last: one leadership move fewer).
      const order = [...o.input.hosts].sort(
        (a, b) =>
          Number(etcd.byHost.get(a)!.member.id === etcd.leader) - Number(etcd.byHost.get(b)!.member.id === etcd.leader),
      );
      const entries: NodeEntry[] = order.map((h, i) => {
        const { member, status } = etcd.byHost.get(h)!;
        return {
          name: member.name,
          image: ADOPTED_IMAGE,
          ...(kubeVersions[h.address] ? { kubernetesVersion: kubeVersions[h.address] } : {}),
          role: "control-plane",
          generation: i + 1,
          init: false,
          adopted: {
            address: h.address,
            ssh: { host: h.sshHost, port: h.sshPort, user: h.sshUser ?? cfg.sshUser },
            hostKey: seen.get(h)!,
            ...(bastion ? { bastion: `${bastion.user}@${bastion.host}:${bastion.port ?? 22}` } : {}),
            etcdVersion: status.version,
            source: o.input.source,
          },
        };
      });
      await access!.close();
      access = undefined;
      const recorded = await record(o, workDir, cfg, entries);
      emit({
        type: "recorded",
        stack: o.stack,
        nodes: recorded.map((n) => ({
          name: n.name,
          address: n.adopted!.address,
          ssh: `${n.adopted!.ssh.user}@${n.adopted!.ssh.host}:${n.adopted!.ssh.port}${n.adopted!.bastion ? ` via ${n.adopted!.bastion}` : ""}`,
          etcdVersion: n.adopted!.etcdVersion,
          ...(n.kubernetesVersion ? { kubernetesVersion: n.kubernetesVersion } : {}),
          generation: n.generation,
          leader:
            etcd.byHost.get(o.input.hosts.find((h) => h.address === n.adopted!.address)!)!.member.id === etcd.leader,
        })),
      });
      return { stack: o.stack, nodes: recorded, ...(o.input.apiEndpoint ? { apiEndpoint: o.input.apiEndpoint } : {}) };
    } finally {
      await access?.close();
    }
  } finally {
    await lock.release();
  }
}

function refuseUnless(problems: string[], refuse: (...p: string[]) => never): void {
  if (problems.length) refuse(...problems);
}

/** The bastion of molt:ssh, checked against the installer's. */
function bastionOf(
  cfg: StackConfig,
  input: AdoptionInput,
  refuse: (...p: string[]) => never,
): BastionTarget | undefined {
  const mine = cfg.sshAccess.bastion;
  const theirs = input.bastion;
  if (theirs && !mine)
    refuse(
      `the hosts are reached through bastion ${theirs.user ? `${theirs.user}@` : ""}${theirs.host}:${theirs.port}; ` +
        `add it to ${cfg.file} as molt:ssh.bastion: { host: ${theirs.host}, port: ${theirs.port}` +
        `${theirs.user ? `, user: ${theirs.user}` : ""}, hostKey: "<its host key>" } (every connection molt makes goes through it)`,
    );
  if (theirs && mine && (theirs.host !== mine.host || theirs.port !== mine.port))
    refuse(
      `the installer's bastion is ${theirs.host}:${theirs.port}, but molt:ssh.bastion is ${mine.host}:${mine.port}; make them the same`,
    );
  if (theirs?.hostKey && mine && fingerprintOf(theirs.hostKey) !== fingerprintOf(mine.hostKey))
    refuse(
      `the installer records bastion host key ${fingerprintOf(theirs.hostKey)}, but molt:ssh.bastion.hostKey is ` +
        `${fingerprintOf(mine.hostKey)}; one of them is wrong`,
    );
  if (!mine) return undefined;
  return {
    host: mine.host,
    port: mine.port,
    user: mine.user,
    hostKey: mine.hostKey,
    agent: true,
  };
}

async function scanAll(
  hosts: AdoptionHost[],
  bastion: BastionTarget | undefined,
  refuse: (...p: string[]) => never,
): Promise<Map<AdoptionHost, string>> {
  const seen = new Map<AdoptionHost, string>();
  const problems: string[] = [];
  // One at a time through a bastion (sshd's MaxStartups), in parallel otherwise.
  const scan = async (h: AdoptionHost) => {
    try {
      seen.set(h, await scanHostKey(h.sshHost, h.sshPort, bastion ? { bastion } : {}));
    } catch (e) {
      problems.push(
        `${bastionHint(e)}host ${h.sshHost}:${h.sshPort} is not reachable over SSH: ${(e as Error).message}`,
      );
    }
  };
  if (bastion) for (const h of hosts) await scan(h);
  else await Promise.all(hosts.map(scan));
  // The bastion's own failure is the same for every host: said once.
  const bastionProblems = problems.filter((p) => p.startsWith("the bastion"));
  if (bastionProblems.length) refuse(bastionProblems[0]);
  refuseUnless(problems, refuse);
  return seen;
}

function bastionHint(e: unknown): string {
  const n = (e as Error).name;
  if (n === "BastionError") return `the bastion refused: ${(e as Error).message}; `;
  if (n === "HostKeyMismatchError" && /bastion/.test((e as Error).message))
    return `the bastion's host key is not molt:ssh.bastion.hostKey: ${(e as Error).message}; `;
  return "";
}

async function probeAll(
  hosts: AdoptionHost[],
  target: (h: AdoptionHost) => SshTarget,
  refuse: (...p: string[]) => never,
): Promise<Map<AdoptionHost, HostFacts>> {
  const facts = new Map<AdoptionHost, HostFacts>();
  const problems: string[] = [];
  await Promise.all(
    hosts.map(async (h) => {
      let ssh: SshSession | undefined;
      try {
        ssh = await SshSession.connect(target(h), { readyTimeoutMs: 15_000 });
        const r = await ssh.exec(probeScript(ssh.target.user));
        facts.set(h, parseProbe(r.stdout));
      } catch (e) {
        problems.push(
          `${bastionHint(e)}host ${h.sshHost}:${h.sshPort}: cannot log in as ${target(h).user}: ${(e as Error).message}`,
        );
      } finally {
        ssh?.close();
      }
    }),
  );
  const bastionProblems = problems.filter((p) => p.startsWith("the bastion"));
  if (bastionProblems.length) refuse(bastionProblems[0]);
  refuseUnless(problems, refuse);
  return facts;
}

/** kubeadm-made stacked etcd on every host (external etcd is refused), of the kind the stack's image is. */
export function stackedEtcdProblems(
  hosts: AdoptionHost[],
  facts: Map<AdoptionHost, HostFacts>,
  kubernetes: boolean,
  cfg: Pick<StackConfig, "file" | "intent">,
): string[] {
  const problems: string[] = [];
  for (const h of hosts) {
    const f = facts.get(h)!;
    const where = `host ${h.address}`;
    if (kubernetes) {
      if (!f.kubeadm)
        problems.push(
          `${where} runs no kubeadm, but ${cfg.file} rolls to Kubernetes ${cfg.intent.kubernetesVersion}: not a kubeadm control-plane node`,
        );
      else if (
        f.apiserverEtcdServers &&
        !/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\]):2379$/.test(f.apiserverEtcdServers)
      )
        problems.push(
          `${where}: kube-apiserver uses external etcd (${f.apiserverEtcdServers}): molt rolls stacked etcd only and does not manage an external one`,
        );
      else if (!f.etcdStaticPod)
        problems.push(
          `${where} has no local etcd static pod (/etc/kubernetes/manifests/etcd.yaml): external etcd, which molt does not manage`,
        );
    } else if (f.kubeadm && f.etcdStaticPod) {
      problems.push(
        `${where} runs Kubernetes (kubeadm ${f.kubeadm}), but ${cfg.file}'s image ${cfg.intent.image} is etcd-only: pick the image of its Kubernetes version`,
      );
    }
    if (!f.etcdPki)
      problems.push(`${where} has no etcd CA at /etc/kubernetes/pki/etcd/ca.crt: not kubeadm-made stacked etcd`);
    if (!f.etcdListening)
      problems.push(`${where} has no etcd member listening on 127.0.0.1:2379: not stacked etcd (an external one?)`);
  }
  return problems;
}

interface EtcdView {
  members: Member[];
  leader?: string;
  leaderName?: string;
  byHost: Map<AdoptionHost, { member: Member; status: EndpointStatus }>;
  status: Map<AdoptionHost, EndpointStatus | string>;
  alarms: string[];
}

async function observeEtcd(access: EtcdAccess, hosts: AdoptionHost[]): Promise<EtcdView> {
  const status = new Map<AdoptionHost, EndpointStatus | string>();
  await Promise.all(
    hosts.map(async (h) => {
      try {
        status.set(h, await access.status(h.address));
      } catch (e) {
        status.set(h, (e as Error).message.split("\n")[0]);
      }
    }),
  );
  let members: Member[] = [];
  let alarms: string[] = [];
  for (const h of hosts) {
    const s = status.get(h);
    if (typeof s !== "object" || s.isLearner) continue;
    try {
      members = await access.memberList(h.address);
      alarms = (await access.alarms(h.address)).map((a) => `${a.alarm} on member ${a.memberId}`);
      break;
    } catch {
      /* the next host */
    }
  }
  const leaders = new Set(
    [...status.values()].flatMap((s) => (typeof s === "object" && s.leader !== "0" ? [s.leader] : [])),
  );
  const leader = leaders.size === 1 ? [...leaders][0] : undefined;
  const byHost = new Map<AdoptionHost, { member: Member; status: EndpointStatus }>();
  for (const h of hosts) {
    const s = status.get(h);
    const m = members.find((mm) => peerHost(mm) === h.address);
    if (m && typeof s === "object" && s.memberId === m.id) byHost.set(h, { member: m, status: s });
  }
  return {
    members,
    ...(leader ? { leader, leaderName: members.find((m) => m.id === leader)?.name } : {}),
    byHost,
    status,
    alarms,
  };
}

function peerHost(m: Member): string | undefined {
  const u = m.peerURLs[0];
  if (!u) return undefined;
  try {
    return new URL(u).hostname.replace(/^\[|\]$/g, "");
  } catch {
    return undefined;
  }
}

/** etcd members == hosts, every member a healthy started voter, no alarm, one leader. */
function etcdProblems(hosts: AdoptionHost[], e: EtcdView, unreachable: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  if (e.members.length === 0) return [`no host answered an etcd member list (${describeStatus(e, hosts)})`];
  for (const m of e.members) {
    const host = hosts.find((h) => h.address === peerHost(m));
    if (!host)
      problems.push(
        `etcd member ${m.name || "(unstarted)"} (${m.peerURLs.join(",")}) has no host in the input: name every control-plane host`,
      );
    if (m.isLearner) problems.push(`etcd member ${m.name || m.id} is a learner: let its join finish first`);
  }
  for (const h of hosts) {
    if (unreachable.has(h.address)) {
      problems.push(`host ${h.address}: etcd not reachable over SSH: ${unreachable.get(h.address)}`);
      continue;
    }
    const s = e.status.get(h);
    const m = e.members.find((mm) => peerHost(mm) === h.address);
    if (!m) {
      problems.push(
        `host ${h.address} is not a member of this etcd cluster (${typeof s === "object" ? `its etcd is member ${s.memberId}` : s}): a host of another cluster mixed in?`,
      );
      continue;
    }
    if (typeof s !== "object") problems.push(`etcd member ${m.name} on ${h.address} does not answer: ${s}`);
    else if (s.memberId !== m.id)
      problems.push(
        `host ${h.address} answers as etcd member ${s.memberId}, not ${m.id} (${m.name}): another cluster?`,
      );
    else if (s.errors.length) problems.push(`etcd member ${m.name} reports errors: ${s.errors.join("; ")}`);
    if (h.hostname && m.name && h.hostname !== m.name && !h.hostname.startsWith(`${m.name}.`))
      problems.push(`host ${h.address} is named ${h.hostname} by the installer, but its etcd member is ${m.name}`);
  }
  if (e.alarms.length) problems.push(`etcd has active alarms: ${e.alarms.join(", ")}; resolve them first`);
  if (!e.leader) problems.push("the etcd members do not agree on one leader");
  return problems;
}

function describeStatus(e: EtcdView, hosts: AdoptionHost[]): string {
  return hosts.map((h) => `${h.address}: ${typeof e.status.get(h) === "string" ? e.status.get(h) : "ok"}`).join("; ");
}

/** The API endpoint answers; kubeadm-config says stacked etcd; each member's Node exists; versions. */
async function kubeChecks(
  input: AdoptionInput,
  access: EtcdAccess,
  etcd: EtcdView,
  refuse: (...p: string[]) => never,
): Promise<Record<string, string>> {
  if (!input.apiEndpoint) refuse("the cluster runs Kubernetes: give its API endpoint (--api-endpoint HOST:PORT)");
  const first = input.hosts[0];
  const ssh = access.session(first.address)!;
  // From a node: the endpoint is the one the nodes (and molt's new nodes) use.
  const r = await ssh.exec(
    `curl -fsS --max-time 5 --cacert /etc/kubernetes/pki/ca.crt https://${input.apiEndpoint}/readyz`,
  );
  if (r.code !== 0 || r.stdout.trim() !== "ok")
    refuse(
      `the API endpoint ${input.apiEndpoint} does not answer /readyz from ${first.address} (${(r.stderr || r.stdout).trim().slice(0, 200)})`,
    );
  const kube = await KubeAccess.open(access.sessions);
  try {
    const problems: string[] = [];
    const versions: Record<string, string> = {};
    for (const h of input.hosts) {
      const c = await kube.components(h.address);
      if (!c.apiserver.ok || !c.apiserver.version)
        problems.push(`kube-apiserver on ${h.address} is not ready: ${c.apiserver.error ?? "no version"}`);
      else versions[h.address] = c.apiserver.version.replace(/^v/, "");
    }
    const { core } = await kube.api(first.address);
    const cm = await core
      .readNamespacedConfigMap({ name: "kubeadm-config", namespace: "kube-system" })
      .catch(() => undefined);
    const cc = cm?.data?.ClusterConfiguration ?? "";
    if (!cc) problems.push("kube-system/kubeadm-config has no ClusterConfiguration: not a kubeadm-made cluster");
    if (/^etcd:\s*\n\s+external:/m.test(cc))
      problems.push("kubeadm-config's ClusterConfiguration names external etcd: molt manages stacked etcd only");
    const cpe = /^controlPlaneEndpoint:\s*"?([^"\s]+)"?/m.exec(cc)?.[1];
    if (cpe && cpe !== input.apiEndpoint)
      problems.push(
        `kubeadm-config's controlPlaneEndpoint is ${cpe}, not the given API endpoint ${input.apiEndpoint}: new nodes join through the former`,
      );
    const nodes = (await core.listNode()).items.map((n) => n.metadata?.name ?? "");
    for (const [, { member }] of etcd.byHost)
      if (!nodes.includes(member.name))
        problems.push(`etcd member ${member.name} has no Node of that name: molt matches members and Nodes by name`);
    refuseUnless(problems, refuse);
    return versions;
  } finally {
    await kube.close();
  }
}

/** One engine run of the program with the adopted entries: no machine is made for them. */
async function record(o: AdoptOptions, workDir: string, cfg: StackConfig, entries: NodeEntry[]): Promise<NodeEntry[]> {
  // The provider's engine plugins are checked first, as a rollout does (nothing is recorded without them).
  checkProviderPlugins(cfg.intent.provider, o.env);
  const stack = await openStack({
    stackName: o.stack,
    workDir,
    env: o.env,
    program: buildProgram(programInputFor(cfg, entries)),
  });
  const result = await stack.up();
  const stored = await parseStoredState(stack, result.outputs);
  if (JSON.stringify(stored.nodes) !== JSON.stringify(entries))
    throw new Error(`internal: the stack recorded [${stored.nodes.map((n) => n.name)}], not the adopted entries`);
  return stored.nodes;
}
