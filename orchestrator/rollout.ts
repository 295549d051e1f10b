// The reconcile loop: observe once -> decide one operation -> act -> repeat. A crash at
// any point is just an earlier pass: rerunning converges from whatever the state and
// etcd say. Waits are conditions with deadlines; nothing sleeps for a fixed time.
import type { Stack } from "@pulumi/pulumi/automation";
import { buildProgram } from "../infra/program";
import type { NodeEntry } from "../infra/node";
import { loadStackConfig, resolveLabImage, type StackConfig } from "./config";
import type { EtcdAccess } from "./edges/etcd";
import type { NodeView, Phase, RolloutEvent, RolloutResultKind } from "./events";
import { acquireLock, type HeldLock } from "./lock";
import type { Intent, Operation, Snapshot } from "./model";
import {
  ensureAccess,
  nodeViews,
  observeEtcd,
  observeKube,
  openKube,
  parseStoredState,
  readStoredState,
  type StoredState,
} from "./observe";
import type { KubeAccess, KubeObservation } from "./edges/kube";
import { decide, isNodeName, isOutdated, waitDeadlineSeconds } from "./plan";
import { placeNewNode, programInputFor } from "./program-input";
import { openStack } from "./stack/driver";
import { explainPending, type PendingOperation } from "./stack/pending";
import { orphanedNodes, targetsFor, urnName, type StateResource } from "./stack/targets";
import { backendUrl, repoRoot } from "./stack/engine";
import { settleEngineLock } from "./stack/engine-lock";
import { newBackupPath } from "./etcd-backup";

export interface RolloutOptions {
  stack: string;
  /** Directory holding Pulumi.yaml and stacks/ (molt's repository root by default). */
  workDir?: string;
  /** Extra environment for the engine (e.g. PULUMI_BACKEND_URL, PULUMI_CONFIG_PASSPHRASE). */
  env?: Record<string, string>;
  /**
   * Nodes whose etcd member is dead: replaced remove-first (member removed with quorum
   * checked, node destroyed, replacement added). Each must be a node of the stack.
   */
  replaceDead?: string[];
  /** Overrides molt:rollout.onFailure. */
  onFailure?: "rollback" | "pause";
  /** Cancel: the rollout stops safely at the next boundary between operations. */
  signal?: AbortSignal;
  onEvent?: (e: RolloutEvent) => void;
  /** Asked once, before the first change, with the planned replacements. */
  confirm?: (plan: PlannedReplacement[]) => Promise<boolean>;
  /** Forward the engine's output lines as `engine` events. */
  engineOutput?: boolean;
  /** Upper bound on operations in one run (a safety net against a planner bug). */
  maxOperations?: number;
  /** Poll interval while waiting on a condition (ms). */
  pollMs?: number;
  /**
   * Called before each change (not before waits): an extension point for approval gates
   * or external pacing. A rejection stops the run at that boundary.
   */
  beforeOperation?: (op: Operation, snapshot: Snapshot) => Promise<void>;
}

export interface PlannedReplacement {
  order: number;
  node: string;
  from: string;
  to: string;
  reason: string;
}

export type Summary = Extract<RolloutEvent, { type: "summary" }>;

export class RefusedError extends Error {}

/** The replacements a rollout would do, oldest outdated first (for `plan` and the prompt). */
export function plannedReplacements(nodes: NodeEntry[], intent: Intent): PlannedReplacement[] {
  const desc = (n: { image: string; kubernetesVersion?: string }) =>
    n.image + (n.kubernetesVersion ? `/k8s ${n.kubernetesVersion}` : "");
  return [...nodes]
    .filter((n) => isOutdated(n, intent))
    .sort((a, b) => a.generation - b.generation)
    .map((n, i) => ({
      order: i + 1,
      node: n.name,
      from: desc(n),
      to: desc(intent),
      reason:
        (n.kubernetesVersion ?? undefined) !== (intent.kubernetesVersion ?? undefined)
          ? `Kubernetes ${n.kubernetesVersion ?? "?"} → ${intent.kubernetesVersion ?? "?"}${n.image !== intent.image ? ", new image" : ""}`
          : "base image differs",
    }));
}

const MUTATING = new Set<Operation["kind"]>([
  "create-first",
  "surge",
  "promote",
  "move-leader",
  "remove-member",
  "remove-stray-member",
  "prune",
  "rollback",
  "update-cluster-config",
  "drain",
  "stop-apiserver",
  "delete-node",
  "update-addons",
]);
/** etcd errors that mean "not now" rather than "no". */
const RETRYABLE_ETCD =
  /unhealthy cluster|not in sync|too many learner|leader changed|no leader|timed out|deadline exceeded|UNAVAILABLE|request timed out/i;

const MEMBERSHIP = new Set<Operation["kind"]>([
  "promote",
  "move-leader",
  "remove-member",
  "remove-stray-member",
  "rollback",
]);

/** Only two shapes of change to the node list exist: append one new node, or drop one node. */
export function assertListTransition(prev: NodeEntry[], next: NodeEntry[], op: Operation): void {
  const prevNames = prev.map((n) => n.name);
  const nextNames = next.map((n) => n.name);
  const appended = nextNames.length === prevNames.length + 1 && prevNames.every((n, i) => nextNames[i] === n);
  const dropped = nextNames.length === prevNames.length - 1 && nextNames.every((n) => prevNames.includes(n));
  const sameEntries = next.every((n) => {
    const p = prev.find((x) => x.name === n.name);
    return !p || JSON.stringify(p) === JSON.stringify(n);
  });
  const ok =
    sameEntries &&
    (((op.kind === "surge" || op.kind === "create-first") &&
      appended &&
      next[next.length - 1].name === op.entry.name) ||
      ((op.kind === "prune" || op.kind === "rollback") && dropped && !nextNames.includes(op.node)));
  if (!ok)
    throw new Error(
      `refusing to apply a node list that is not "${op.kind}" of the stored list: [${prevNames}] -> [${nextNames}]`,
    );
}

export async function rollout(o: RolloutOptions): Promise<Summary> {
  const t0 = Date.now();
  const emit = (e: RolloutEvent) => o.onEvent?.(e);
  const workDir = o.workDir ?? process.env.MOLT_PROJECT_DIR ?? repoRoot;
  const cfg: StackConfig = resolveLabImage(loadStackConfig(workDir, o.stack));
  const intent: Intent = {
    ...cfg.intent,
    rollout: { ...cfg.intent.rollout, ...(o.onFailure ? { onFailure: o.onFailure } : {}) },
    ...(o.replaceDead?.length ? { replaceDead: o.replaceDead } : {}),
  };
  emit({
    type: "start",
    stack: o.stack,
    command: "rollout",
    provider: intent.provider,
    replicas: intent.replicas,
    image: intent.image,
    ...(intent.kubernetesVersion ? { kubernetesVersion: intent.kubernetesVersion } : {}),
    time: new Date().toISOString(),
  });

  const backend = o.env?.PULUMI_BACKEND_URL ?? backendUrl();
  const lock: HeldLock = acquireLock(backend, o.stack, "rollout");
  if (lock.recoveredFrom)
    emit({
      type: "lock-recovered",
      previousPid: lock.recoveredFrom.pid,
      previousStartedAt: lock.recoveredFrom.startedAt,
    });

  const phases: Record<Phase | "molt", number> = {
    observe: 0,
    provision: 0,
    etcd: 0,
    kube: 0,
    wait: 0,
    snapshot: 0,
    molt: 0,
  };
  const timed = async <T>(
    phase: Phase,
    op: Operation["kind"],
    node: string | undefined,
    fn: () => Promise<T>,
  ): Promise<T> => {
    const t = Date.now();
    let ok = false;
    try {
      const r = await fn();
      ok = true;
      return r;
    } finally {
      const ms = Date.now() - t;
      phases[phase] += ms;
      if (phase !== "observe") emit({ type: "phase", phase, operation: op, ...(node ? { node } : {}), ms, ok });
    }
  };

  let stack: Stack | undefined;
  let access: EtcdAccess | undefined;
  /** The Kubernetes edge, over the sessions of `kubeFor` (reopened with the etcd edge). */
  let kube: KubeAccess | undefined;
  let kubeFor: EtcdAccess | undefined;
  let operations = 0;
  let snapshotPath: string | undefined;
  let confirmed = !o.confirm;
  let lastViews: NodeView[] = [];
  const waits = new Map<string, number>();
  const expired = new Set<string>();
  let rollingBack: string | undefined;
  /** Why the last surge's `up` failed. */
  let surgeError: string | undefined;
  /** The stored state as this run last read or wrote it (undefined: read it from the backend). */
  let known: StoredState | undefined;
  /** The node this run surged and has not yet seen as a healthy voter. */
  let joining: string | undefined;

  const finish = (result: RolloutResultKind, reason: string): Summary => {
    const wallMs = Date.now() - t0;
    phases.molt = Math.max(
      0,
      wallMs - phases.observe - phases.provision - phases.etcd - phases.kube - phases.wait - phases.snapshot,
    );
    const s: Summary = {
      type: "summary",
      result,
      reason,
      stack: o.stack,
      wallMs,
      operations,
      phases,
      nodes: lastViews,
      ...(snapshotPath ? { snapshotPath } : {}),
    };
    emit(s);
    return s;
  };

  try {
    stack = await openStack({
      stackName: o.stack,
      workDir,
      env: o.env,
      program: buildProgram(programInputFor(cfg, [])),
    });
    await settleEngineLock(backend, o.stack, intent.timeouts.joinSeconds + 120);
    const theStack = stack;
    // One export of the state at the start serves both clean-ups of what a killed run left.
    const atStart = await exportState(theStack);
    await clearPendingOperations(theStack, atStart, emit);
    if (intent.replaceDead?.length) {
      // Named before anything is looked at closer: a typo must not pass silently.
      const names = (atStart.listed ?? []).map((n) => n.name);
      const unknown = intent.replaceDead.filter((n) => !names.includes(n));
      if (unknown.length) {
        throw new RefusedError(
          `--replace-dead ${unknown.join(", ")}: no such node in stack ${o.stack} (nodes: ${names.join(", ") || "none"}); nothing was changed. ` +
            `If it was already replaced, run without --replace-dead.`,
        );
      }
    }

    const engineOut = o.engineOutput
      ? { onOutput: (line: string) => emit({ type: "engine", line: line.trimEnd() }) }
      : {};
    const up = async (prev: NodeEntry[], next: NodeEntry[], op: Operation, node: string) => {
      assertListTransition(prev, next, op);
      // The list is re-read under our lock right before the change: it must be the one we
      // decided on. The same export of the state says which resources this change targets.
      const { resources, listed } = await exportState(theStack);
      const storedList = listed ?? (await readStoredState(theStack)).nodes;
      if (canonical(storedList) !== canonical(prev))
        throw new Error("the stored node list changed under this run; stopping without changes");
      const plan = targetsFor(resources, node, [...new Set([...prev, ...next].map((n) => n.name))]);
      theStack.workspace.program = buildProgram(programInputFor(cfg, next));
      // The state is read from the backend again only after a failed up: while this run
      // holds the stack's lock, the list it last wrote is the list in the backend.
      known = undefined;
      let result = await timed("provision", op.kind, node, () =>
        theStack.up({ ...engineOut, ...(plan ? { target: plan.targets } : {}) }),
      );
      if (plan && (op.kind === "prune" || op.kind === "rollback")) {
        // Never a silent skip: the engine leaves a targeted delete undone when an untargeted
        // resource still depends on it. Every resource of the node must be gone.
        const left = (await exportState(theStack)).resources.filter((r) => plan.nodeResources.includes(r.urn));
        if (left.length > 0) {
          emit({
            type: "phase",
            phase: "provision",
            operation: op.kind,
            node,
            ms: 0,
            ok: false,
            detail: `a targeted update left ${left.length} resource(s) of ${node} in place; updating the whole stack`,
          });
          result = await timed("provision", op.kind, node, () => theStack.up(engineOut));
        }
      }
      known = await parseStoredState(theStack, result.outputs);
    };

    /**
     * Destroys what the state holds of nodes the list does not (a failed or killed surge),
     * with a targeted `up` over the unchanged list. Returns the nodes removed.
     */
    const removeOrphans = async (state?: ExportedState): Promise<string[]> => {
      const { resources, listed: listedNodes } = state ?? (await exportState(theStack));
      if (!listedNodes) return [];
      const listed = listedNodes.map((n) => n.name);
      const orphans = orphanedNodes(resources, listed, (n) => isNodeName(o.stack, n));
      if (orphans.length === 0) return [];
      const names = [...listed, ...orphans];
      const targets = new Set<string>();
      const owned = new Set<string>();
      for (const n of orphans) {
        const plan = targetsFor(resources, n, names);
        plan?.targets.forEach((t) => targets.add(t));
        plan?.nodeResources.forEach((u) => owned.add(u));
      }
      const current = (await readStoredState(theStack)).nodes;
      for (const n of orphans)
        emit({
          type: "decision",
          pass: 0,
          operation: {
            kind: "prune",
            node: n,
            reason: `the state holds resources of ${n}, which never reached the node list (a surge that failed or was killed): destroy them`,
          },
        });
      operations++;
      theStack.workspace.program = buildProgram(programInputFor(cfg, current));
      known = undefined;
      const result = await timed("provision", "prune", orphans.join(","), () =>
        theStack.up({ ...engineOut, target: [...targets] }),
      );
      known = await parseStoredState(theStack, result.outputs);
      const left = (await exportState(theStack)).resources.filter((r) => owned.has(r.urn));
      if (left.length)
        throw new Error(
          `a targeted update left ${left.length} resource(s) of ${orphans.join(", ")} in place: ${left.map((r) => urnName(r.urn)).join(", ")}`,
        );
      return orphans;
    };
    await removeOrphans(atStart);

    for (let pass = 1; ; pass++) {
      if (o.signal?.aborted)
        return finish("cancelled", "cancelled by the caller; stopped at a boundary between operations");
      if (operations >= (o.maxOperations ?? 200))
        return finish("failed", `stopped after ${operations} operations without converging (a planner bug?)`);

      // Observe.
      const tObs = Date.now();
      const stored: StoredState = known ?? (await timed("observe", "wait", undefined, () => readStoredState(theStack)));
      known = stored;
      let etcdError: string | undefined;
      let etcd: Snapshot["etcd"];
      if (stored.nodes.length > 0) {
        try {
          access = await timed("observe", "wait", undefined, () => ensureAccess(access, stored));
          etcd = access
            ? await timed("observe", "wait", undefined, () => observeEtcd(access!, stored.nodes))
            : undefined;
          if (!access) etcdError = "the stack holds no SSH key for its nodes";
        } catch (e) {
          etcdError = (e as Error).message;
          await access?.close();
          access = undefined;
        }
      }
      let kubeObs: KubeObservation | undefined;
      let kubeError: string | undefined;
      if (intent.kubernetesVersion !== undefined && stored.nodes.length > 0) {
        if (!access) kubeError = etcdError ?? "no SSH access to the nodes";
        else {
          try {
            if (kubeFor !== access) {
              await kube?.close();
              kube = undefined;
              kube = await timed("observe", "wait", undefined, () => openKube(access!));
              kubeFor = access;
            }
            kubeObs = await timed("observe", "wait", undefined, () => observeKube(kube!, stored.nodes));
          } catch (e) {
            kubeError = (e as Error).message.split("\n")[0];
            await kube?.close();
            kube = undefined;
            kubeFor = undefined;
          }
        }
      }
      // A failed surge whose node never reached the stored list (its machine did not come
      // up) has nothing left to undo: stop here rather than surge again.
      if (rollingBack && !stored.nodes.some((n) => n.name === rollingBack)) {
        const removed = await removeOrphans();
        return finish(
          "rolled-back",
          `new node ${rollingBack} could not be created (${surgeError ?? "its machine did not come up"}); the existing nodes were left untouched${removed.length ? ", and what the stack held of it was destroyed" : ""}`,
        );
      }
      const snapshot: Snapshot = {
        intent,
        nodes: stored.nodes,
        endpoints: stored.endpoints,
        ...(etcd ? { etcd } : {}),
        ...(etcdError ? { etcdError } : {}),
        ...(kubeObs ? { kube: kubeObs } : {}),
        ...(kubeError ? { kubeError } : {}),
        expired: [...expired],
        ...(joining ? { joining } : {}),
      };
      lastViews = nodeViews(snapshot);
      // A new node is "joining" until etcd and, with Kubernetes, its control plane are healthy.
      if (
        joining &&
        lastViews.some(
          (v) =>
            v.name === joining &&
            v.member?.healthy &&
            !v.member.learner &&
            (intent.kubernetesVersion === undefined || v.kube?.healthy),
        )
      )
        joining = undefined;
      emit({ type: "observed", pass, nodes: lastViews, ms: Date.now() - tObs });

      // Decide.
      const op = decide(snapshot, o.stack);
      emit({ type: "decision", pass, operation: op });
      // A decision other than waiting ends every wait except etcd refusals being retried.
      if (op.kind !== "wait") for (const k of [...waits.keys()]) if (!k.startsWith("retry:")) waits.delete(k);

      if (!confirmed && MUTATING.has(op.kind)) {
        confirmed = await o.confirm!(plannedReplacements(stored.nodes, intent));
        if (!confirmed) return finish("cancelled", "not confirmed; nothing was changed");
      }
      if (MUTATING.has(op.kind) && o.beforeOperation) await o.beforeOperation(op, snapshot);
      if (MEMBERSHIP.has(op.kind) && !snapshotPath && access && etcd) {
        snapshotPath = await takeSnapshot(access, snapshot, o.stack, emit, timed);
      }

      // Act.
      switch (op.kind) {
        case "done":
          return finish(
            operations === 0 ? "noop" : rollingBack ? "rolled-back" : "succeeded",
            operations === 0 ? `nothing to do: ${op.reason}` : op.reason,
          );
        case "refuse":
          return finish(operations === 0 ? "refused" : "failed", `${op.condition}: ${op.reason}`);
        case "pause":
          return finish("paused", op.reason);
        case "wait": {
          const started = waits.get(op.key) ?? Date.now();
          waits.set(op.key, started);
          const limitS = waitDeadlineSeconds(op.key, intent.timeouts);
          if (Date.now() - started > limitS * 1000) {
            expired.add(op.key);
            continue;
          }
          await timed("wait", "wait", op.node, () => pollInterval(o.pollMs ?? 500, o.signal));
          continue;
        }
        case "create-first":
        case "surge": {
          operations++;
          waits.set(`join:${op.entry.name}`, Date.now());
          joining = op.entry.name;
          try {
            await up(stored.nodes, [...stored.nodes, placeNewNode(cfg, op.entry, stored.nodes)], op, op.entry.name);
          } catch (e) {
            // The next pass finds the half-made node and rolls it back (or pauses).
            emit({
              type: "phase",
              phase: "provision",
              operation: op.kind,
              node: op.entry.name,
              ms: 0,
              ok: false,
              detail: firstLines((e as Error).message),
            });
            if (op.kind === "create-first")
              return finish("failed", `creating the first node failed: ${firstLines((e as Error).message)}`);
            expired.add(`join:${op.entry.name}`);
            rollingBack = op.entry.name;
            surgeError = firstLines((e as Error).message, 3);
            if (intent.rollout.onFailure === "pause")
              return finish(
                "paused",
                `new node ${op.entry.name} failed to join; left in place for inspection: ${firstLines((e as Error).message)}`,
              );
          }
          continue;
        }
        case "prune": {
          operations++;
          await up(
            stored.nodes,
            stored.nodes.filter((n) => n.name !== op.node),
            op,
            op.node,
          );
          // Its machine is gone: its Node object goes too (Cluster API deletes the Node after
          // the machine). If this fails, the next pass finds the Node stale and deletes it.
          const via = kubeObs?.via;
          if (kube && via && via !== op.node) {
            await timed("kube", "delete-node", op.node, () => kube!.deleteNode(via, op.node)).catch(() => undefined);
          }
          if (rollingBack === op.node)
            return finish(
              "rolled-back",
              `new node ${op.node} did not join; it was removed and the old nodes were left untouched`,
            );
          continue;
        }
        case "rollback": {
          operations++;
          rollingBack = op.node;
          if (op.memberId && access) {
            const via = stored.nodes.find((n) => n.name !== op.node && etcd?.status[n.name]?.ok)?.name;
            if (via) await timed("etcd", op.kind, op.node, () => access!.memberRemove(via, op.memberId!));
          }
          await up(
            stored.nodes,
            stored.nodes.filter((n) => n.name !== op.node),
            op,
            op.node,
          );
          return finish("rolled-back", op.reason);
        }
        case "update-cluster-config": {
          operations++;
          await timed("kube", op.kind, undefined, () => kube!.setClusterConfigVersion(kubeObs!.via, op.version));
          continue;
        }
        case "delete-node": {
          operations++;
          await timed("kube", op.kind, op.node, () => kube!.deleteNode(kubeObs!.via, op.node));
          continue;
        }
        case "drain": {
          operations++;
          let blocked: string | undefined;
          await timed("kube", op.kind, op.node, async () => {
            blocked = await drain(kube!, kubeObs!.via, op.node, intent.timeouts.drainSeconds, waits, o.signal);
            if (blocked) throw new Error(blocked);
          }).catch((e) => {
            if (!blocked) throw e;
          });
          if (blocked) {
            return finish(
              "failed",
              `drain of ${op.node} did not finish within ${intent.timeouts.drainSeconds}s (molt:timeouts.drainSeconds): ${blocked}. ` +
                `No node was removed: ${op.node} stays cordoned and every etcd member is in place. Let the PodDisruptionBudget allow the eviction ` +
                `(or raise the deadline), then run molt again: it continues with the drain.`,
            );
          }
          continue;
        }
        case "stop-apiserver": {
          operations++;
          await timed("kube", op.kind, op.node, () =>
            kube!.stopApiServer(op.node, intent.timeouts.settleSeconds, () => pollInterval(250, o.signal)),
          );
          continue;
        }
        case "update-addons": {
          operations++;
          const newest = [...stored.nodes].sort((a, b) => b.generation - a.generation)[0];
          await timed("kube", op.kind, undefined, () => kube!.updateAddons(kubeObs!.via, newest.name, op.version));
          continue;
        }
        case "promote":
        case "move-leader":
        case "remove-member":
        case "remove-stray-member": {
          operations++;
          const a = access!;
          const leaderNode = lastViews.find((v) => v.member?.leader)?.name;
          const via = (exclude?: string) =>
            lastViews.find((v) => v.member && !v.member.learner && v.member.healthy && v.name !== exclude)?.name ??
            leaderNode!;
          const subject = op.kind === "move-leader" ? op.from : op.kind === "remove-stray-member" ? op.name : op.node;
          try {
            await timed("etcd", op.kind, subject, async () => {
              if (op.kind === "promote") await a.memberPromote(via(op.node), op.memberId);
              else if (op.kind === "move-leader") await a.moveLeader(op.from, op.toId);
              else if (op.kind === "remove-member") await a.memberRemove(via(op.node), op.memberId);
              else await a.memberRemove(via(), op.memberId);
            });
            waits.delete(`retry:${op.kind}:${subject}`);
          } catch (e) {
            // etcd's own guards (a member connected for less than 5 s does not count as
            // active; a learner not yet in sync; a leader election) refuse for a moment:
            // observe again and retry, within the settle deadline. Anything else stops.
            const message = (e as Error).message;
            if (!RETRYABLE_ETCD.test(message)) throw e;
            const key = `retry:${op.kind}:${subject}`;
            const started = waits.get(key) ?? Date.now();
            waits.set(key, started);
            if (Date.now() - started > intent.timeouts.settleSeconds * 1000) {
              return finish(
                "failed",
                `etcd kept refusing ${op.kind} of ${subject} for ${intent.timeouts.settleSeconds}s: ${message.split("\n")[0]}`,
              );
            }
            emit({
              type: "phase",
              phase: "etcd",
              operation: op.kind,
              node: subject,
              ms: 0,
              ok: false,
              detail: `etcd refused for now, will retry: ${message.split("\n")[0]}`,
            });
            await timed("wait", "wait", subject, () => pollInterval(o.pollMs ?? 500, o.signal));
            operations--;
          }
          continue;
        }
      }
    }
  } finally {
    await kube?.close();
    await access?.close();
    lock.release();
  }
}

/**
 * Cordons the node and evicts its pods through the Eviction API until none is left, or
 * the drain deadline (counted from the first attempt, across runs of this loop) passes.
 * Returns undefined when drained, or what blocked it.
 */
async function drain(
  kube: KubeAccess,
  via: string,
  node: string,
  seconds: number,
  waits: Map<string, number>,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const key = `drain:${node}`;
  const started = waits.get(key) ?? Date.now();
  waits.set(key, started);
  await kube.cordon(via, node);
  for (;;) {
    const round = await kube.evictRound(via, node);
    if (round.remaining === 0) {
      waits.delete(key);
      return undefined;
    }
    if (Date.now() - started > seconds * 1000) {
      return round.blocked.length > 0
        ? `evictions refused: ${round.blocked.join("; ")}`
        : `${round.remaining} pod(s) still on the node (terminating or not evictable)`;
    }
    if (signal?.aborted) return "cancelled";
    // Evictions a PodDisruptionBudget refuses (429) are retried, as kubectl drain does.
    await pollInterval(1000, signal);
  }
}

/** JSON with object keys sorted: the engine's export and molt's parse order keys differently. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );
}

function firstLines(s: string, n = 6): string {
  // A bootstrap script's own verdict ("HH:MM:SS [node] error: ...") says most; then the engine's errors.
  const own = [
    ...new Set(
      s
        .split("\n")
        .map((l) => /\[[^\]]+\] error: .*/.exec(l)?.[0])
        .filter((l): l is string => !!l),
    ),
  ];
  const lines = s.split("\n").filter((l) => /error|fail|timed out/i.test(l) && !/bash\.bashrc/.test(l));
  return [...own, ...(own.length ? [] : lines.length ? lines : s.split("\n"))].slice(0, n).join(" | ");
}

function pollInterval(ms: number, signal?: AbortSignal): Promise<void> {
  // The interval between observations while a condition (with its own deadline) is awaited.
  return new Promise((resolve) => {
    const onAbort = () => (clearTimeout(poll), resolve());
    const poll = setTimeout(() => (signal?.removeEventListener("abort", onAbort), resolve()), ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

async function takeSnapshot(
  access: EtcdAccess,
  s: Snapshot,
  stack: string,
  emit: (e: RolloutEvent) => void,
  timed: <T>(phase: Phase, op: Operation["kind"], node: string | undefined, fn: () => Promise<T>) => Promise<T>,
): Promise<string> {
  const path = newBackupPath(stack);
  const node = s.nodes.find((n) => {
    const st = s.etcd?.status[n.name];
    return st?.ok && !st.status.isLearner;
  })!.name;
  const bytes = await timed("snapshot", "wait", node, () => access.snapshot(node, path));
  emit({ type: "snapshot", path, bytes, node });
  return path;
}

/** The exported state: its resources, pending operations and the node list in its outputs (undefined if it has none yet). */
async function exportState(stack: Stack) {
  const exported = await stack.exportStack();
  const deployment = exported.deployment as {
    resources?: (StateResource & { outputs?: { molt?: { nodes?: unknown } } })[];
    pending_operations?: PendingOperation[];
  };
  const resources = deployment.resources ?? [];
  const nodes = resources.find((r) => r.type === "pulumi:pulumi:Stack")?.outputs?.molt?.nodes;
  return { exported, deployment, resources, listed: Array.isArray(nodes) ? (nodes as NodeEntry[]) : undefined };
}

type ExportedState = Awaited<ReturnType<typeof exportState>>;

/** Resolves what a killed engine left pending (orchestrator/stack/pending.ts), and says so. */
async function clearPendingOperations(
  stack: Stack,
  state: ExportedState,
  emit: (e: RolloutEvent) => void,
): Promise<void> {
  const { exported, deployment, resources, listed } = state;
  const pending = deployment.pending_operations ?? [];
  if (pending.length === 0) return;
  const operations = explainPending(
    pending,
    resources,
    (listed ?? []).map((n) => n.name),
  );
  await stack.importStack({ ...exported, deployment: { ...deployment, pending_operations: [] } });
  emit({ type: "pending-cleared", operations });
}
