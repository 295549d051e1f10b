// The reconcile loop: observe once -> decide one operation -> act -> record, and again. A
// crash at any point is just an earlier pass: rerunning converges from whatever the state
// and etcd say. Waits are conditions with deadlines; nothing sleeps for a fixed time.
//   observe: orchestrator/observe.ts    decide: orchestrator/core/plan/    act: orchestrator/act/
//   record:  orchestrator/core/memory.ts (the loop's memory, advanced by pure functions)
import { pause } from "../lib/poll";
import { act, changesMembership, isChange } from "./act";
import type { StackConfig } from "./config";
import type { Edges } from "./core/edges";
import { retainBackups, takeBackup } from "./etcd-backup";
import type { NodeView, RolloutEvent } from "./events";
import type { StackLock } from "./lease/hold";
import { releasePreflight, releaseRecorder } from "./promotion/hooks";
import { afterAct, afterDecision, afterObservation, endOf, initialMemory, worldMemory } from "./core/memory";
import type { LoopMemory, Stop } from "./core/memory";
import type { Intent, Operation, World } from "./core/model";
import { observe, reobserveAddons, reobserveLb, reobserveNode } from "./observe";
import { k8s } from "./edges/kube-support";
import { loadBalancerGap, type EdgeFactory } from "./edges/open";
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
import { openRun, type Run } from "./run/context";
import { EngineCancelledError } from "./stack/driver";
import { moltHome } from "./stack/engine";
import { redactDeep, redactText, rememberEnvSecrets } from "./report/redact";
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
    const run = await openRun({
      stack: o.stack,
      workDir: o.workDir,
      env: o.env,
      edges: o.edges,
      signal: o.signal,
      emit,
    });
    try {
      const started = await start(o, run);
      return await loop(o, run, started, (end) => emit(summary(o.stack, run, started, end, leftForOwner)));
    } finally {
      await run.close();
    }
  } catch (e) {
    if (e instanceof Error) e.message = redactText(e.message);
    throw e;
  }
}

/** What the loop starts from (intent, wall clock, the release's recorder, the lease) and leaves for the summary. */
interface Started {
  intent: Intent;
  wall: () => number;
  release: ReturnType<typeof releaseRecorder>;
  lease: StackLock;
  memory: LoopMemory;
  views: NodeView[];
  backupPath?: string;
  /** Steps of a chained upgrade this run saw converged, every gate holding (in order). */
  stepsVerified: { kubernetesVersion: string; image: string }[];
}

/** Everything before the edges open: nothing changes until the lease is held and the lab claimed. */
async function start(o: RolloutOptions, run: Run): Promise<Started> {
  const { workDir, backend, env, store, emit } = run;
  const intent = controlsIntent(intentOf(run.cfg, o), o);
  // @kubernetes/client-node takes about a second to load: loaded while the stack opens, not in the first pass.
  if (intent.kubernetesVersion !== undefined) k8s().catch(() => undefined);
  // molt:rollout.window: outside it nothing starts (OutsideWindowError, CLI exit 8).
  const wall = o.wallClock ?? controlsClock();
  const window = checkWindowAtStart(intent.rollout.window, wall());
  const time = new Date().toISOString();
  emit({ type: "start", stack: o.stack, command: "rollout", ...startOf(intent), ...(window ? { window } : {}), time });
  // Missing engine plugins are refused before anything is written, the lease included.
  run.checkPlugins();
  // Staging across environments (orchestrator/promotion/): refuse an unverified release; record a converged one.
  const promotion = { cfg: run.cfg, stack: o.stack, workDir, backend, env, store, emit, verify: o.verify };
  await releasePreflight(promotion);
  const release = releaseRecorder({ ...promotion, signingKeyFile: o.signingKeyFile });
  // The stack's lease (orchestrator/lease/hold.ts): its loss aborts `run.signal`, which cancels
  // an engine step in flight as the caller's signal does.
  const lease = await run.hold("rollout");
  // A lab stack's lab is its own: another stack's is refused here, before anything changes
  // (after the lease: a backend that cannot be used is said as such first).
  run.claimLab((message) => emit({ type: "warning", message }));
  return { intent, wall, release, lease, memory: initialMemory, views: [], stepsVerified: [] };
}

/** The passes: observe -> decide -> act -> record, until the memory says the run ends. */
async function loop(o: RolloutOptions, run: Run, s: Started, finish: (end: Stop) => Summary): Promise<Summary> {
  const { intent, lease } = s;
  const { clock, emit } = run;
  const signal = run.signal!;
  const pollMs = o.pollMs ?? 500;
  const now = o.now ?? Date.now;
  let confirmed = !o.confirm;
  try {
    const { edges, leaks } = await openEdges(o, run, intent);
    const hookOutputInReports = run.cfg.notify.includeHookOutput;
    const ctx = {
      edges,
      intent,
      signal,
      pollMs,
      timed: clock.timed,
      report: emit,
      hookCallbacks: o.hooks,
      hookOutputInReports,
    };

    for (let pass = 1; ; pass++) {
      const stop = stopBefore(o, lease, s.memory);
      if (stop) return finish(stop);

      // Observe.
      const t = Date.now();
      const world = await clock.timed("observe", "wait", undefined, () =>
        observe(edges, intent, worldMemory(s.memory, windowClosedReason(intent.rollout.window, s.wall())), run.self),
      );
      s.views = nodeViews(world);
      // A new node counts in once it is healthy in the API load balancer too (plan/endpoint.ts).
      s.memory = afterObservation(
        s.memory,
        (n) => isHealthyNode(s.views, n, intent.kubernetesVersion !== undefined) && isTargetHealthy(world, n),
      );
      // A lease in the cluster: taken as soon as a new stack's first node can hold it, waits included.
      await lease.holdInCluster(edges, { whenReachable: true });
      emit({ type: "observed", pass, nodes: s.views, ms: Date.now() - t });

      // Decide. A chained upgrade's step whose gates all hold is verified (the record says so).
      noteVerifiedStep(s, world, o.stack);
      const op = decide(world, o.stack);
      emit({ type: "decision", pass, operation: op });
      const decided = afterDecision(s.memory, op, now(), intent.timeouts);
      s.memory = decided.memory;
      const end = endOf(s.memory, op);
      const converged = {
        edges,
        nodes: s.views,
        operations: s.memory.operations,
        signal,
        stepsVerified: s.stepsVerified,
      };
      if (end) {
        await leaks.atEnd(end, world);
        return finish(await s.release.settle(end, converged));
      }
      if (!isChange(op)) {
        const waitFor = () => waitOut(op, world, { o, edges, intent, memory: s.memory, pollMs, now, signal });
        if (!decided.expiredNow) await clock.timed("wait", "wait", op.kind === "wait" ? op.node : undefined, waitFor);
        continue;
      }

      // Act.
      if (!confirmed) {
        confirmed = await o.confirm!(replacementsNow(world));
        if (!confirmed) return finish({ result: "cancelled", reason: "not confirmed; nothing was changed" });
      }
      await o.beforeOperation?.(op, world);
      await lease.holdInCluster(edges);
      if (changesMembership(op) && !s.backupPath && world.etcd) {
        s.backupPath = await takeBackup(await edges.nodes.etcd(), world, o.stack, clock.timed, emit);
        if (s.backupPath) retainBackups(o.stack, run.cfg.backups.keep, s.backupPath, emit);
      }
      const outcome = await act(op, { ...ctx, world });

      // Record.
      const acted = afterAct(s.memory, op, outcome, now(), intent);
      s.memory = acted.memory;
      if (acted.stop) return finish(acted.stop);
      if (outcome.kind === "retry") await clock.timed("wait", "wait", undefined, () => pause(pollMs, signal));
    }
  } catch (e) {
    // A cancelled engine step ends the run at the boundary after it (stack/engine-process.ts).
    if (e instanceof EngineCancelledError && lease.signal.aborted)
      return finish({ result: "failed", reason: lease.lostReason() });
    if (e instanceof EngineCancelledError)
      return finish({
        result: "cancelled",
        reason: `cancelled by the caller: ${e.message}; rerun \`molt rollout\` to continue`,
      });
    throw e;
  }
}

/**
 * The edges, opened for a change once the lease is held: what a dead run's engine left is
 * cleared, machines a killed run leaked are listed, and --replace-dead is checked against the
 * stack's nodes, before the first pass.
 */
async function openEdges(o: RolloutOptions, run: Run, intent: Intent) {
  const change = { engineOutput: o.engineOutput, engineLockDeadlineSeconds: intent.timeouts.joinSeconds + 120 };
  const gap = loadBalancerGap(run.cfg);
  if (gap) run.emit({ type: "warning", message: gap });
  const edges = await run.open({ change });
  const cleared = await edges.stack.prepare();
  if (cleared.length) run.emit({ type: "pending-cleared", operations: cleared });
  const leaks = leakWatch({
    inventory:
      o.inventory === undefined ? (o.edges ? undefined : inventoryOf(run.cfg, o.env)) : (o.inventory ?? undefined),
    terminate: !!o.terminateLeaked,
    stack: () => edges.stack,
    emit: run.emit,
  });
  await leaks.atStart();
  checkReplaceDead(intent, await edges.stack.state(), o.stack);
  return { edges, leaks };
}

/** A chained upgrade's step converged with every gate holding: the release's record says this run verified it. */
function noteVerifiedStep(s: Started, world: World, stack: string): void {
  const passed = passedStep(world, stack);
  if (passed && !s.stepsVerified.some((v) => v.kubernetesVersion === passed.kubernetesVersion))
    s.stepsVerified.push({ kubernetesVersion: passed.kubernetesVersion, image: passed.image });
}

/** At the top of every pass (the boundary between operations): a lost lease, a cancel, the safety net. */
function stopBefore(o: RolloutOptions, lease: StackLock, memory: LoopMemory): Stop | undefined {
  if (lease.signal.aborted) return { result: "failed", reason: lease.lostReason() };
  if (o.signal?.aborted)
    return { result: "cancelled", reason: "cancelled by the caller; stopped at a boundary between operations" };
  if (memory.operations >= (o.maxOperations ?? 200))
    return {
      result: "failed",
      reason: `stopped after ${memory.operations} operations without converging (a planner bug?)`,
    };
  return undefined;
}

/**
 * A wait: observe again after the poll interval (at once when its deadline just passed); a
 * join, a node's health, kube-proxy's rollout and (a cheap one's) load balancer are watched until their
 * end shows (loop/wait-watch.ts).
 */
async function waitOut(
  op: Operation,
  world: World,
  w: {
    o: RolloutOptions;
    edges: Edges;
    intent: Intent;
    memory: LoopMemory;
    pollMs: number;
    now: () => number;
    signal: AbortSignal;
  },
): Promise<unknown> {
  const watch = watchOf(op, w.edges.lb?.watchable === true);
  if (!watch || op.kind !== "wait") return pause(w.pollMs, w.signal);
  const { edges, now } = w;
  return watchWait({
    world,
    op,
    decide: (x) => decide(x, w.o.stack),
    reread: (x) =>
      "node" in watch
        ? reobserveNode(edges, x, watch.node)
        : "lb" in watch
          ? reobserveLb(edges, x)
          : reobserveAddons(edges, x),
    tickMs: WATCH_TICK_MS,
    fullEveryMs: WATCH_FULL_PASS_MS,
    deadline: (w.memory.waits[op.key] ?? now()) + waitDeadlineSeconds(op.key, w.intent.timeouts) * 1000 + 1,
    now,
    signal: w.signal,
  });
}

/** The run's summary event: how it ended, where its time went, the nodes as last observed. */
function summary(
  stack: string,
  run: Run,
  s: Started,
  end: Stop,
  leftForOwner: NonNullable<Summary["leftForOwner"]>,
): Summary {
  const { wallMs, phases } = run.clock.close();
  return {
    type: "summary",
    ...end,
    stack,
    wallMs,
    operations: s.memory.operations,
    phases,
    nodes: s.views,
    ...(s.backupPath ? { snapshotPath: s.backupPath } : {}),
    replaced: [...s.memory.controls.retired],
    ...(leftForOwner.length ? { leftForOwner } : {}),
  };
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
