// The etcd checks of adoption: kubeadm-made stacked etcd on every host, members == hosts,
// every member a healthy started voter, no alarm, one leader.
import type { StackConfig } from "../config";
import type { EtcdAccess } from "../edges/etcd";
import type { EndpointStatus, Member } from "../core/observations";
import type { AdoptionHost } from "./input";
import type { HostFacts } from "./probe";

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
          `${where} runs no kubeadm, but ${cfg.file} rolls to Kubernetes ${cfg.intent.kubernetesVersion}: not a ` +
            `kubeadm control-plane node`,
        );
      else if (
        f.apiserverEtcdServers &&
        !/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\]):2379$/.test(f.apiserverEtcdServers)
      )
        problems.push(
          `${where}: kube-apiserver uses external etcd (${f.apiserverEtcdServers}): molt rolls stacked etcd only ` +
            `and does not manage an external one`,
        );
      else if (!f.etcdStaticPod)
        problems.push(
          `${where} has no local etcd static pod (/etc/kubernetes/manifests/etcd.yaml): external etcd, which molt ` +
            `does not manage`,
        );
    } else if (f.kubeadm && f.etcdStaticPod) {
      problems.push(
        `${where} runs Kubernetes (kubeadm ${f.kubeadm}), but ${cfg.file}'s image ${cfg.intent.image} is etcd-only: ` +
          `pick the image of its Kubernetes version`,
      );
    }
    if (!f.etcdPki)
      problems.push(`${where} has no etcd CA at /etc/kubernetes/pki/etcd/ca.crt: not kubeadm-made stacked etcd`);
    if (!f.etcdListening)
      problems.push(`${where} has no etcd member listening on 127.0.0.1:2379: not stacked etcd (an external one?)`);
  }
  return problems;
}

export interface EtcdView {
  members: Member[];
  leader?: string;
  leaderName?: string;
  byHost: Map<AdoptionHost, { member: Member; status: EndpointStatus }>;
  status: Map<AdoptionHost, EndpointStatus | string>;
  alarms: string[];
}

export async function observeEtcd(access: EtcdAccess, hosts: AdoptionHost[]): Promise<EtcdView> {
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
export function etcdProblems(hosts: AdoptionHost[], e: EtcdView, unreachable: ReadonlyMap<string, string>): string[] {
  const problems: string[] = [];
  if (e.members.length === 0) return [`no host answered an etcd member list (${describeStatus(e, hosts)})`];
  for (const m of e.members) {
    const host = hosts.find((h) => h.address === peerHost(m));
    if (!host)
      problems.push(
        `etcd member ${m.name || "(unstarted)"} (${m.peerURLs.join(",")}) has no host in the input: name every ` +
          `control-plane host`,
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
        `host ${h.address} is not a member of this etcd cluster ` +
          `(${typeof s === "object" ? `its etcd is member ${s.memberId}` : s}): a host of another cluster mixed in?`,
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
