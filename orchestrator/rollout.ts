// The reconcile loop: observe once -> decide one operation -> act -> record, and again. A
// crash at any point is just an earlier pass: rerunning converges from whatever the state
// and etcd say. Waits are conditions with deadlines; nothing sleeps for a fixed time.
//   observe: orchestrator/observe.ts    decide: orchestrator/core/plan/    act: orchestrator/act/
//   record:  orchestrator/core/memory.ts (the loop's memory, advanced by pure functions)
import { pause } from "../lib/poll";
import { act, changesMembership, isChange } from "./act";
import { loadStackConfig, resolveLabImage, type StackConfig } from "./config";
import { claimStackLab } from "./lease/lab-claim";
import { loadBalancerGap, openEdges, type EdgeFactory } from "./edges/open";
import type { Edges } from "./core/edges";
import { retainBackups, takeBackup } from "./etcd-backup";
import type { NodeView, RolloutEvent } from "./events";
import { holdStack } from "./lease/hold";
import { checkProviderPlugins } from "./stack/plugins";
import { releasePreflight, releaseRecorder } from "./promotion/hooks";
import { afterAct, afterDecision, afterObservation, endOf, initialMemory, worldMemory, type Stop } from "./core/memory";
import { RunClock } from "./loop/timing";
import type { Intent, Operation, World } from "./core/model";
import { observe, reobserveAddons, reobserveNode } from "./observe";
import { k8s } from "./edges/kube-support";
import { watchOf, watchWait } from "./loop/wait-watch";
import {
  decide,
  isTargetHealthy,
  passedStep,
  plannedReplacements,
  replacementsNow,
  waitDeadlineSeconds,
  type PlannedReplacement,
} from "./core/plan";
import { EngineCancelledError } from "./stack/driver";
import { backendUrl, moltHome, repoRoot } from "./stack/engine";
import { redactDeep, redactText, rememberEnvSecrets } from "./report/redact";
import { ownerBackend } from "./backend/store";
import type { StackState } from "./core/edges";
import { isHealthyNode, nodeViews } from "./views";
import { checkWindowAtStart, controlsClock, windowClosedReason } from "./controls/window";
import { controlsIntent, type HookCallbacks } from "./controls/intent";
import { inventoryOf, leakWatch } from "./leaks";
import type { MachineInventory } from "./core/edges";

export { plannedReplacements, type PlannedReplacement };

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
  beforeOperation?: (op: Operation, world: World) => Promise<void>;
  /** The edges the loop talks to (the engine, SSH, etcd, Kubernetes); tests pass fakes. */
  edges?: EdgeFactory;
  /** The clock wait deadlines are measured on (ms since the epoch); tests pass a fast one. */
  now?: () => number;
  /** With molt:release: soak the converged release inline (molt:promotion.soakMinutes), as `molt verify` does. */
  verify?: boolean;
  /**
   * With `verify`: the ed25519 private key file that signs the record
   * (default: $MOLT_SIGNING_KEY_FILE, then $MOLT_SIGNING_KEY).
   */
  signingKeyFile?: string;
  /** --max-replacements: start no replacement after this many; the run ends paused and the next continues. */
  maxReplacements?: number;
  /** Hook callbacks (postJoin, preRetire, postRetire), run after the molt:hooks command of the same name. */
  hooks?: HookCallbacks;
  /** The wall clock molt:rollout.window is judged on (ms since the epoch); default: now. */
  wallClock?: () => number;
  /**
   * --take-over: the stack the cluster's ownership marker names, whose state is gone; this stack
   * takes the cluster over before any change (core/ownership.ts). Must name the owner exactly.
   */
  takeOver?: string;
  /**
   * --terminate-leaked: terminate the cloud machines a killed run left, at the end of a
   * converged run (orchestrator/leaks.ts).
   */
  terminateLeaked?: boolean;
  /** Where the cloud's machines are listed; default: the stack's cloud (AWS), none with test edges. null: none. */
  inventory?: MachineInventory | null;
}

/** A watched wait re-reads its node this often, and observes everything at least this often. */
const WATCH_TICK_MS = 100;
const WATCH_FULL_PASS_MS = 5_000;

export type Summary = Extract<RolloutEvent, { type: "summary" }>;

export class RefusedError extends Error {}

export async function rollout(o: RolloutOptions): Promise<Summary> {
  // Nothing this run reports holds a secret it knows of (report/redact.ts): its events are redacted here.
  rememberEnvSecrets(process.env, moltHome());
  if (o.env) rememberEnvSecrets(o.env);
  const leftForOwner: NonNullable<Summary["leftForOwner"]> = [];
  const emit = <E extends RolloutEvent>(raw: E): E => {
    const e = redactDeep(raw);
    // Adopted machines retired by this run are listed again in the summary.
    if (e.type === "left-for-owner") leftForOwner.push((({ type: _, ...rest }) => rest)(e));
    o.onEvent?.(e);
    return e;
  };
  try {
    return await run(o, emit, leftForOwner);
  } catch (e) {
    if (e instanceof Error) e.message = redactText(e.message);
    throw e;
  }
}

async function run(
  o: RolloutOptions,
  emit: <E extends RolloutEvent>(e: E) => E,
  leftForOwner: NonNullable<Summary["leftForOwner"]>,
): Promise<Summary> {
  const workDir = o.workDir ?? process.env.MOLT_PROJECT_DIR ?? repoRoot;
  const cfg = resolveLabImage(loadStackConfig(workDir, o.stack));
  const intent = controlsIntent(intentOf(cfg, o), o);
  // @kubernetes/client-node takes about a second to load: loaded while the stack opens, not in the first pass.
  if (intent.kubernetesVersion !== undefined) k8s().catch(() => undefined);
  // molt:rollout.window: outside it nothing starts (OutsideWindowError, CLI exit 8).
  const wall = o.wallClock ?? controlsClock();
  const window = checkWindowAtStart(intent.rollout.window, wall());
  emit({
    type: "start",
    stack: o.stack,
    command: "rollout",
    ...startOf(intent),
    ...(window ? { window } : {}),
    time: new Date().toISOString(),
  });
  const backend = o.env?.PULUMI_BACKEND_URL ?? backendUrl();
  // Who this run is, as the cluster's ownership marker names its owner.
  const self = { stack: o.stack, backend: ownerBackend(backend) };
  // A run that may `up` needs the provider's engine plugins, which molt never downloads during
  // a run: missing ones are refused before anything is written, the lease included.
  if (!o.edges) checkProviderPlugins(cfg.intent.provider, o.env);
  // Staging across environments (orchestrator/promotion/): refuse an unverified release; record a converged one.
  const promotion = { cfg, stack: o.stack, workDir, backend, env: o.env, emit, verify: o.verify };
  await releasePreflight(promotion);
  const release = releaseRecorder({ ...promotion, signingKeyFile: o.signingKeyFile });
  // The stack's lease (orchestrator/lease/hold.ts): `lock.signal` aborts if it is ever lost,
  // which cancels an engine step in flight as the caller's signal does.
  const lock = await holdStack(backend, o.stack, cfg.lockSeconds, emit, o.env, cfg.lockIn);
  // A lab stack's lab is its own: another stack's is refused here, before anything changes
  // (after the lease: a backend that cannot be used is said as such first).
  let stackCfg: StackConfig;
  try {
    stackCfg = claimStackLab(cfg, o.stack, backend, (message) => emit({ type: "warning", message }));
  } catch (e) {
    await lock.release();
    throw e;
  }
  const signal = o.signal ? AbortSignal.any([o.signal, lock.signal]) : lock.signal;

  const clock = new RunClock(emit);
  const pollMs = o.pollMs ?? 500;
  const now = o.now ?? Date.now;
  let memory = initialMemory;
  let views: NodeView[] = [];
  /** Steps of a chained upgrade this run saw converged, every gate holding (in order). */
  const stepsVerified: { kubernetesVersion: string; image: string }[] = [];
  let backupPath: string | undefined;
  let confirmed = !o.confirm;
  const finish = (end: Stop): Summary => {
    const { wallMs, phases } = clock.close();
    const s: Summary = {
      type: "summary",
      ...end,
      stack: o.stack,
      wallMs,
      operations: memory.operations,
      phases,
      nodes: views,
      ...(backupPath ? { snapshotPath: backupPath } : {}),
      replaced: [...memory.controls.retired],
      ...(leftForOwner.length ? { leftForOwner } : {}),
    };
    return emit(s);
  };

  let edges: Edges | undefined;
  try {
    const gap = loadBalancerGap(stackCfg);
    if (gap) emit({ type: "warning", message: gap });
    edges = await (o.edges ?? openEdges)({
      stackName: o.stack,
      workDir,
      env: o.env,
      backend,
      config: stackCfg,
      report: emit,
      engineOutput: o.engineOutput,
      engineLockDeadlineSeconds: intent.timeouts.joinSeconds + 120,
      signal,
      tagProcesses: true,
      lock,
      guarded: lock.guarded,
    });
    // A lease in the cluster is taken before anything is cleared or changed (a stack with no
    // cluster yet: before the first change after its first node's etcd is up).
    await lock.holdInCluster(edges);
    const cleared = await edges.stack.prepare();
    if (cleared.length) emit({ type: "pending-cleared", operations: cleared });
    const opened = edges;
    const leaks = leakWatch({
      inventory:
        o.inventory === undefined ? (o.edges ? undefined : inventoryOf(cfg, o.env)) : (o.inventory ?? undefined),
      terminate: !!o.terminateLeaked,
      stack: () => opened.stack,
      emit,
    });
    await leaks.atStart();
    checkReplaceDead(intent, await edges.stack.state(), o.stack);
    const ctx = {
      edges,
      intent,
      signal,
      pollMs,
      timed: clock.timed,
      report: emit,
      hookCallbacks: o.hooks,
      hookOutputInReports: cfg.notify.includeHookOutput,
    };

    for (let pass = 1; ; pass++) {
      if (lock.signal.aborted) return finish({ result: "failed", reason: lock.lostReason() });
      if (o.signal?.aborted)
        return finish({
          result: "cancelled",
          reason: "cancelled by the caller; stopped at a boundary between operations",
        });
      if (memory.operations >= (o.maxOperations ?? 200))
        return finish({
          result: "failed",
          reason: `stopped after ${memory.operations} operations without converging (a planner bug?)`,
        });

      // Observe.
      const t = Date.now();
      const e = edges;
      const world = await clock.timed("observe", "wait", undefined, () =>
        observe(e, intent, worldMemory(memory, windowClosedReason(intent.rollout.window, wall())), self),
      );
      views = nodeViews(world);
      // A new node counts in once it is healthy in the API load balancer too (plan/endpoint.ts).
      memory = afterObservation(
        memory,
        (n) => isHealthyNode(views, n, intent.kubernetesVersion !== undefined) && isTargetHealthy(world, n),
      );
      // A lease in the cluster: taken as soon as a new stack's first node can hold it, waits included.
      await lock.holdInCluster(e, { whenReachable: true });
      emit({ type: "observed", pass, nodes: views, ms: Date.now() - t });

      // Decide. A chained upgrade's step whose gates all hold is verified (the record says so).
      const passed = passedStep(world, o.stack);
      if (passed && !stepsVerified.some((v) => v.kubernetesVersion === passed.kubernetesVersion))
        stepsVerified.push({ kubernetesVersion: passed.kubernetesVersion, image: passed.image });
      const op = decide(world, o.stack);
      emit({ type: "decision", pass, operation: op });
      const decided = afterDecision(memory, op, now(), intent.timeouts);
      memory = decided.memory;
      const end = endOf(memory, op);
      if (end) {
        await leaks.atEnd(end, world);
        return finish(
          await release.settle(end, { edges: e, nodes: views, operations: memory.operations, signal, stepsVerified }),
        );
      }
      if (!isChange(op)) {
        // A wait: observe again after the poll interval (at once when its deadline just passed);
        // a join, a node's health and kube-proxy's rollout are watched until their end shows (loop/wait-watch.ts).
        const watch = watchOf(op);
        const waitFor = async (): Promise<unknown> =>
          watch && op.kind === "wait"
            ? watchWait({
                world,
                op,
                decide: (w) => decide(w, o.stack),
                reread: (w) => ("node" in watch ? reobserveNode(e, w, watch.node) : reobserveAddons(e, w)),
                tickMs: WATCH_TICK_MS,
                fullEveryMs: WATCH_FULL_PASS_MS,
                deadline: (memory.waits[op.key] ?? now()) + waitDeadlineSeconds(op.key, intent.timeouts) * 1000 + 1,
                now,
                signal,
              })
            : pause(pollMs, signal);
        if (!decided.expiredNow) await clock.timed("wait", "wait", op.kind === "wait" ? op.node : undefined, waitFor);
        continue;
      }

      // Act.
      if (!confirmed) {
        confirmed = await o.confirm!(replacementsNow(world));
        if (!confirmed) return finish({ result: "cancelled", reason: "not confirmed; nothing was changed" });
      }
      await o.beforeOperation?.(op, world);
      await lock.holdInCluster(edges);
      if (changesMembership(op) && !backupPath && world.etcd) {
        backupPath = await takeBackup(await edges.nodes.etcd(), world, o.stack, clock.timed, emit);
        if (backupPath) retainBackups(o.stack, cfg.backups.keep, backupPath, emit);
      }
      const outcome = await act(op, { ...ctx, world });

      // Record.
      const acted = afterAct(memory, op, outcome, now(), intent);
      memory = acted.memory;
      if (acted.stop) return finish(acted.stop);
      if (outcome.kind === "retry") await clock.timed("wait", "wait", undefined, () => pause(pollMs, signal));
    }
  } catch (e) {
    // A cancelled engine step ends the run at the boundary after it (stack/engine-process.ts).
    if (e instanceof EngineCancelledError && lock.signal.aborted)
      return finish({ result: "failed", reason: lock.lostReason() });
    if (e instanceof EngineCancelledError)
      return finish({
        result: "cancelled",
        reason: `cancelled by the caller: ${e.message}; rerun \`molt rollout\` to continue`,
      });
    throw e;
  } finally {
    // No engine command of this run outlives it (stack/edge.ts reads the state in the background).
    await edges?.stack.quiesce?.();
    // Before the nodes' sessions close: a lease in the cluster is released through them.
    await lock.release();
    await edges?.nodes.close();
  }
}

/** The intent of this run: the stack's config, with the command line's overrides. */
function intentOf(cfg: StackConfig, o: RolloutOptions): Intent {
  const rollout = { ...cfg.intent.rollout, ...(o.onFailure ? { onFailure: o.onFailure } : {}) };
  return {
    ...cfg.intent,
    rollout,
    ...(o.replaceDead?.length ? { replaceDead: o.replaceDead } : {}),
    ...(o.takeOver !== undefined ? { takeOver: o.takeOver } : {}),
  };
}

function startOf(intent: Intent) {
  const { provider, replicas, image, kubernetesVersion } = intent;
  return { provider, replicas, image, ...(kubernetesVersion ? { kubernetesVersion } : {}) };
}

/** --replace-dead names nodes of the stack: a typo must not pass silently. */
function checkReplaceDead(intent: Intent, state: StackState, stack: string): void {
  const names = state.nodes.map((n) => n.name);
  const unknown = (intent.replaceDead ?? []).filter((n) => !names.includes(n));
  if (unknown.length === 0) return;
  throw new RefusedError(
    `--replace-dead ${unknown.join(", ")}: no such node in stack ${stack} (nodes: ${names.join(", ") || "none"}); ` +
      `nothing was changed. ` +
      `If it was already replaced, run without --replace-dead.`,
  );
}
