// `molt adopt`: a running cluster molt did not create (KubeOne, kubeadm by hand) becomes a
// stack whose node list holds "adopted" entries. Adoption changes nothing on the cluster but
// its ownership marker: it checks, claims the cluster for the stack, then records. Every check
// runs before anything is recorded, and a failed one refuses with its reason (exit 2). Host
// keys are never trusted silently.
//   reach.ts        bastion, host keys, logins       etcd-checks.ts  stacked etcd, members == hosts
//   kube-checks.ts  API endpoint, kubeadm-config     ownership.ts    no other stack owns it; claimed
//   vip-checks.ts   VIP mode: the hosts' keepalived group
//   record.ts       the entries, one engine run
import type { Stack } from "@pulumi/pulumi/automation";
import type { NodeEndpoint, NodeEntry } from "../core/nodes";
import { buildProgram } from "../../infra/program";
import type { SshTarget } from "../../infra/remote/ssh";
import { EtcdAccess } from "../edges/etcd";
import { acquireLock, machineStore, type HeldLock } from "../lease/bucket";
import { acquireClusterLock } from "../lease/cluster";
import { leaseHomeOf } from "../lease/hold";
import { openRun } from "../run/context";
import { exportState, viewOf } from "../stack/state";
import { readStoredState } from "../stack/state";
import { programInputFor } from "../config/program-input";
import { openStack, StackNotFoundError } from "../stack/driver";
import { AdoptionRefusedError, refuseUnless, type AdoptEvent, type SeenHostKey } from "./errors";
import { etcdProblems, observeEtcd, stackedEtcdProblems } from "./etcd-checks";
import type { ExpectedHostKeys } from "./host-keys";
import type { AdoptionHost, AdoptionInput } from "./input";
import { checkLabImports, matchImports, type ImportRequest } from "./imports";
import { kubeChecks } from "./kube-checks";
import { kubeletCloudProviderProblems, machineIdentities } from "./cloud-checks";
import { resolveEndpoint } from "./endpoint";
import { cloudProviderOf } from "../../infra/providers/registry";
import { adoptCredentials, bastionOf, pinnedHostKeys, probeAll } from "./reach";
import { adoptedEntries, adoptedView, record } from "./record";
import { claimForAdoption } from "./ownership";
import { readHostKeepalived, vipGroupChecks, type HostKeepalived } from "./vip-checks";

export { InvalidAdoptionInputError, parseHostList, parseKubeOneOutput, type AdoptionInput } from "./input";
export { ExpectedHostKeys, InvalidHostKeyInputError } from "./host-keys";
export {
  AdoptionRefusedError,
  HostKeysNotConfirmedError,
  type AdoptedView,
  type AdoptEvent,
  type SeenHostKey,
} from "./errors";
export { stackedEtcdProblems } from "./etcd-checks";
export { parseImportFlags, type ImportRequest } from "./imports";

export interface AdoptOptions {
  stack: string;
  workDir?: string;
  env?: Record<string, string>;
  input: AdoptionInput;
  hostKeys: ExpectedHostKeys;
  /** Asked with the host keys nobody named; true trusts exactly those. Absent: refuse (exit 6). */
  confirmHostKeys?: (seen: SeenHostKey[]) => Promise<boolean>;
  onEvent?: (e: AdoptEvent) => void;
  /** `--import HOST=ID`: machines taken into the stack, destroyed by molt when their nodes retire. */
  imports?: ImportRequest[];
  /**
   * `--take-over STACK`: the cluster's ownership marker names STACK, whose state is gone; this
   * adoption takes the cluster over. Must name the current owner exactly.
   */
  takeOver?: string;
}

export interface AdoptResult {
  stack: string;
  nodes: NodeEntry[];
  apiEndpoint?: string;
}

export async function adopt(o: AdoptOptions): Promise<AdoptResult> {
  const emit = (e: AdoptEvent) => o.onEvent?.(e);
  // The same start as every command's (run/context.ts); the lease is adoption's own (below).
  const run = await openRun({ stack: o.stack, workDir: o.workDir, env: o.env });
  const { cfg, workDir, backend } = run;
  const refuse = (...problems: string[]): never => {
    throw new AdoptionRefusedError(o.stack, problems);
  };
  // The provider's engine plugins first, as a rollout does: without them nothing is written.
  run.checkPlugins();
  const imports = matchImports(o.imports ?? [], o.input.hosts, cfg, refuse);
  // Where the lease lives (lease/hold.ts): in the cluster, this machine's first, then the
  // adopted cluster's etcd once it is reached (before anything is recorded). Not the stack's
  // lease of run.hold: the cluster's etcd is reached through the hosts adopted, not the stack.
  run.makeBackend();
  const home = leaseHomeOf(backend, cfg.lockIn, run.store !== undefined);
  const lock = await acquireLock(backend, o.stack, "adopt", {
    ttlSeconds: cfg.lockSeconds,
    env: o.env,
    ...(home === "cluster"
      ? { store: machineStore(), scope: "machine" as const }
      : { store: run.store!, scope: "backend" as const }),
  });
  let clusterLock: HeldLock | undefined;
  // The state guard's token (infra/guard.ts), for a stack whose lease lives in the cluster.
  let guardToken = "";
  try {
    // 0. A lab stack's lab is its own (lease/lab-claim.ts): another stack's is refused before anything
    // is recorded.
    const owned = run.claimLab((message) => emit({ type: "check", check: "lab", ok: true, detail: message }));
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
      if (home === "cluster") guardToken = viewOf(await exportState(stack, { graphOnly: true })).guardToken ?? "";
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
    const privateKey = stack && cfg.cloud ? await stackPrivateKey(stack) : undefined;
    const credentials = adoptCredentials(cfg, privateKey, o.input, refuse);
    const bastion = bastionOf(cfg, o.input, refuse, credentials);
    const login = (h: AdoptionHost): Omit<SshTarget, "hostKey"> => ({
      host: h.sshHost,
      port: h.sshPort,
      user: h.sshUser ?? cfg.sshUser,
      ...credentials,
      ...(bastion ? { bastion } : {}),
    });

    // 3. Host keys: scanned without trust, compared with what the user named.
    const seen = await pinnedHostKeys(o.input.hosts, bastion, o.hostKeys, o.confirmHostKeys, emit, refuse);
    await checkLabImports(imports, seen, cfg, refuse);

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
    const facts = await probeAll(
      o.input.hosts,
      (h) => ({ ...login(h), hostKey: seen.get(h)! }),
      refuse,
      cfg.intent.provider,
    );
    emit({ type: "check", check: "ssh", ok: true, detail: `${facts.size} hosts reachable with pinned host keys` });
    const kubernetes = cfg.intent.kubernetesVersion !== undefined;
    refuseUnless(stackedEtcdProblems(o.input.hosts, facts, kubernetes, cfg), refuse);
    if (kubernetes)
      refuseUnless(
        kubeletCloudProviderProblems(o.input.hosts, facts, cfg.cloud?.bootstrap.cloudProvider, cfg.file),
        refuse,
      );
    const cloudDef = cloudProviderOf(cfg.intent.provider);
    const identities = machineIdentities(o.input.hosts, facts, imports, cloudDef?.attachesAdopted === true);
    refuseUnless(identities.problems, refuse);

    // 5. etcd: members == hosts, all healthy, no alarm, one leader.
    let access: EtcdAccess | undefined;
    try {
      access = await EtcdAccess.open(endpoints, { user: cfg.sshUser, ...credentials, ...(bastion ? { bastion } : {}) });
    } catch (e) {
      refuse(`etcd cannot be reached on any host: ${(e as Error).message}`);
    }
    try {
      if (home === "cluster")
        clusterLock = await acquireClusterLock(access!.leaseKv(), o.stack, "adopt", { ttlSeconds: cfg.lockSeconds });
      const etcd = await observeEtcd(access!, o.input.hosts);
      refuseUnless(etcdProblems(o.input.hosts, etcd, access!.unreachable), refuse);
      emit({
        type: "check",
        check: "etcd",
        ok: true,
        detail: `${etcd.members.length} voting members == the hosts, healthy, no alarm, leader ${etcd.leaderName}`,
      });

      // 5b. VIP mode: the keepalived group on the hosts is one molt's nodes can join.
      let vrrp = new Map<AdoptionHost, number>();
      if (cfg.apiEndpoint) {
        const kept = new Map<AdoptionHost, HostKeepalived>();
        for (const h of o.input.hosts) {
          const ssh = access!.session(h.address);
          if (!ssh) refuse(`host ${h.address} has no SSH session to read its keepalived from`);
          kept.set(h, await readHostKeepalived(ssh!));
        }
        const v = vipGroupChecks(o.input.hosts, kept, cfg.apiEndpoint);
        refuseUnless(v.problems, refuse);
        emit({ type: "check", check: "vip", ok: true, detail: v.detail });
        vrrp = v.priorities;
      }

      // 6. Kubernetes: the API endpoint answers; kubeadm-config names stacked etcd; Nodes.
      let kubeVersions: Record<string, string> = {};
      if (kubernetes) {
        kubeVersions = await kubeChecks(o.input, access!, etcd, refuse);
        emit({
          type: "check",
          check: "kubernetes",
          ok: true,
          detail:
            `API endpoint ${o.input.apiEndpoint} ready; ` +
            `kube-apiserver ${[...new Set(Object.values(kubeVersions))].join(", ")}`,
        });
      }

      // What the endpoint's name leads to, as the nodes resolve it: the program checks the stack's
      // load balancer against it (infra/providers/api-load-balancer.ts) before anything is recorded.
      const first = o.input.hosts[0];
      const endpointCheck =
        kubernetes && cloudDef?.checksEndpoint && o.input.apiEndpoint
          ? await resolveEndpoint(access!.session(first.address)!, first.address, o.input.apiEndpoint)
          : undefined;

      // 7. Ownership: no other stack's; claimed for this one (kept open: undone if the record fails).
      const claim = await claimForAdoption(
        access!,
        { self: run.self, ...(o.takeOver ? { takeOver: o.takeOver } : {}) },
        refuse,
      );
      emit({ type: "check", check: "ownership", ok: true, detail: claim.detail });

      // 8. Record: the leader last (retired last: one leadership move fewer).
      const entries = adoptedEntries(
        o.input,
        etcd,
        seen,
        kubeVersions,
        cfg,
        bastion,
        imports,
        identities.providerIds,
        vrrp,
      );
      // The sessions stay open until the record is written: the lease in the cluster is kept
      // alive through them, and a failed record undoes the claim through them.
      let recorded: NodeEntry[];
      try {
        recorded = await record(
          o,
          workDir,
          owned,
          entries,
          refuse,
          home === "cluster" ? guardToken : undefined,
          endpointCheck,
        );
      } catch (e) {
        await claim.undo().catch((u: unknown) =>
          emit({
            type: "warning",
            message:
              `the cluster's ownership marker still names stack ${o.stack}, though nothing was recorded: ` +
              `${(u as Error).message.split("\n")[0]}. Run this adoption again, or \`molt adopt ... --take-over ` +
              `${o.stack}\` from the stack that should own the cluster`,
          }),
        );
        throw e;
      }
      if (endpointCheck)
        emit({
          type: "check",
          check: "load-balancer",
          ok: true,
          detail: `the stack's API load balancer serves ${endpointCheck.endpoint} and holds every adopted node`,
        });
      emit({ type: "recorded", stack: o.stack, nodes: recorded.map((n) => adoptedView(n, o.input, etcd)) });
      return { stack: o.stack, nodes: recorded, ...(o.input.apiEndpoint ? { apiEndpoint: o.input.apiEndpoint } : {}) };
    } finally {
      await clusterLock?.release().catch(() => undefined); // else it expires by itself
      await access?.close();
    }
  } finally {
    await lock.release();
  }
}

/** molt:ssh.privateKey of an existing cloud stack, decrypted by the engine; undefined when unset. */
async function stackPrivateKey(stack: Stack): Promise<string | undefined> {
  try {
    const v = await stack.getConfig("molt:ssh.privateKey", true);
    return v.value || undefined;
  } catch (e) {
    if (/configuration key .* not found|missing required configuration/i.test((e as Error).message)) return undefined;
    throw e;
  }
}
