// Recording an adopted cluster: its nodes as "adopted" entries (the leader last), written by
// one engine run of the program, which makes no machine for them.
import { randomUUID } from "node:crypto";
import { StateChangedByAnotherRunError } from "../stack/state-changed";
import { ADOPTED_IMAGE } from "../../infra/adopted";
import type { NodeEntry } from "../core/nodes";
import { buildProgram, type ProgramInput } from "../../infra/program";
import { endpointCheckProblemsIn, type EndpointCheck } from "../../infra/providers/api-load-balancer";
import type { BastionTarget } from "../../infra/remote/ssh";
import type { StackConfig } from "../config";
import { programInputFor } from "../config/program-input";
import { openStack } from "../stack/driver";
import { parseStoredState } from "../stack/state";
import type { AdoptedView, Refuse } from "./errors";
import type { EtcdView } from "./etcd-checks";
import type { AdoptionHost, AdoptionInput } from "./input";

/** The node entries of the adopted hosts, the leader last (retired last: one leadership move fewer). */
export function adoptedEntries(
  input: AdoptionInput,
  etcd: EtcdView,
  seen: Map<AdoptionHost, string>,
  kubeVersions: Record<string, string>,
  cfg: StackConfig,
  bastion: BastionTarget | undefined,
  imports: ReadonlyMap<AdoptionHost, string> = new Map(),
  /** Each host's machine as its cloud controller names it (cloud-checks.ts machineIdentities). */
  providerIds: ReadonlyMap<AdoptionHost, string> = new Map(),
  /** Each host's keepalived priority (VIP mode: vip-checks.ts). */
  vrrpPriorities: ReadonlyMap<AdoptionHost, number> = new Map(),
): NodeEntry[] {
  const isLeader = (h: AdoptionHost) => Number(etcd.byHost.get(h)!.member.id === etcd.leader);
  const order = [...input.hosts].sort((a, b) => isLeader(a) - isLeader(b));
  return order.map((h, i) => {
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
        source: input.source,
        ...(providerIds.has(h) ? { providerId: providerIds.get(h)! } : {}),
        ...(imports.has(h) ? { machine: { importId: imports.get(h)! } } : {}),
        ...(vrrpPriorities.has(h) ? { keepalived: { priority: vrrpPriorities.get(h)! } } : {}),
      },
    };
  });
}

/** How `recorded` shows an adopted node. */
export function adoptedView(n: NodeEntry, input: AdoptionInput, etcd: EtcdView): AdoptedView {
  const a = n.adopted!;
  const host = input.hosts.find((h) => h.address === a.address)!;
  return {
    name: n.name,
    address: a.address,
    ssh: `${a.ssh.user}@${a.ssh.host}:${a.ssh.port}${a.bastion ? ` via ${a.bastion}` : ""}`,
    etcdVersion: a.etcdVersion,
    ...(n.kubernetesVersion ? { kubernetesVersion: n.kubernetesVersion } : {}),
    generation: n.generation,
    leader: etcd.byHost.get(host)!.member.id === etcd.leader,
  };
}

/**
 * One engine run of the program with the adopted entries: no machine is made for them (a
 * cloud's load balancer registration is declared, which changes nothing). With machines to
 * import, a preview first: the engine reads each one there, and an id that names no machine
 * (or one the provider cannot read) refuses the adoption with nothing recorded. So with an
 * endpoint check: the program asks the cloud for the load balancer, and one that does not
 * serve the endpoint or hold the adopted nodes refuses it.
 */
export async function record(
  o: { stack: string; env?: Record<string, string> },
  workDir: string,
  cfg: StackConfig,
  entries: NodeEntry[],
  refuse: Refuse,
  /** The state guard's token this run read, where the lease lives in the cluster (infra/guard.ts). */
  guardExpect?: string,
  endpointCheck?: EndpointCheck,
): Promise<NodeEntry[]> {
  const guard = guardExpect !== undefined ? { expect: guardExpect, token: randomUUID() } : undefined;
  const stack = await openStack({
    stackName: o.stack,
    workDir,
    env: o.env,
    program: buildProgram(programInput(cfg, entries, endpointCheck), guard),
  });
  const importing = entries.some((e) => e.adopted?.machine);
  if (!cfg.lab && (importing || endpointCheck)) {
    const problem = await stack.preview().then(
      () => undefined,
      (e: Error) => e.message,
    );
    const unserved = problem ? endpointCheckProblemsIn(problem) : [];
    if (unserved.length) refuse(...unserved);
    if (problem)
      refuse(
        `${importing ? "the engine cannot import the machines named with --import, or " : ""}the cloud cannot ` +
          `describe the API load balancer: ${lastLines(problem, 8)}`,
      );
  }
  const result = await stack.up().catch((e: Error) => {
    // Another run created nodes in this stack since it was read: nothing was recorded.
    if (guard && /molt-state-guard: this stack's state was changed/.test(e.message))
      throw new StateChangedByAnotherRunError(o.stack);
    throw e;
  });
  const stored = await parseStoredState(stack, result.outputs);
  if (JSON.stringify(stored.nodes) !== JSON.stringify(entries))
    throw new Error(`internal: the stack recorded [${stored.nodes.map((n) => n.name)}], not the adopted entries`);
  return stored.nodes;
}

function programInput(cfg: StackConfig, entries: NodeEntry[], endpointCheck?: EndpointCheck): ProgramInput {
  const input = programInputFor(cfg, entries);
  return endpointCheck && input.provider !== "lab" ? { ...input, endpointCheck } : input;
}

function lastLines(text: string, n: number): string {
  return text.trim().split("\n").slice(-n).join("\n");
}
