// The stack edge: molt's node list lives in the stack's outputs, and every change to it is
// one targeted `up` of the engine (orchestrator/stack/targets.ts). Before each `up` the
// stored list is re-read under molt's lock and must be the one the change was decided on.
import type { NodeListChange, StackEdge, StackState } from "../core/edges";
import { randomUUID } from "node:crypto";
import { GUARD_NAME, GUARD_TARGET } from "../../infra/guard";
import { CommandError, type Deployment, type EngineEvent, type Stack } from "@pulumi/pulumi/automation";
import { resourceStep } from "./resource-steps";
import { detach } from "../../infra/lab/lb-impl";
import { labLbInputs } from "../../infra/lab/lb";
import type { NodeEntry } from "../core/nodes";
import { cloudProviderOf } from "../../infra/providers/registry";
import { buildProgram } from "../../infra/program";
import type { StackConfig } from "../config";
import type { RolloutEvent } from "../events";
import type { StackLock } from "../lease/hold";
import type { HostFileCarry, Operation } from "../core/model";
import { isNodeName } from "../core/plan";
import { programInputFor } from "../config/program-input";
import { openStackReading, repairMessage } from "./driver";
import { teardownWarning } from "../teardown";
import { parseTeardownWarning } from "../../infra/remote/teardown";
import { ENGINE_OWNER_VAR, ENGINE_TAG_VAR, engineTag } from "./engine-process";
import { WarmProviders } from "./warm-provider";
import { clearEngineLeftovers } from "./leftovers";
import type { ClearedOperation } from "../core/edges";
import {
  clearPendingOperations,
  exportState,
  stateOfExport,
  parseStoredState,
  readStoredState,
  storedStateOfExport,
  type StateView,
  viewOf,
} from "./state";
import { type StoredState } from "../core/nodes";
import { crossNodeResources, orphanedNodes, targetsFor, urnName } from "./targets";
import { upWithoutReadback } from "./lean-up";
import { createdNodeEndpoint, notShownDeleted, UpFailedError, UpRecorder, type UpRecord } from "./up-events";
import { EngineCancelledError } from "./cancelled";
import { AnotherUpdateInProgressError, isUpdateInProgress, StateChangedByAnotherRunError } from "./state-changed";

export { AnotherUpdateInProgressError, StateChangedByAnotherRunError };

export interface EngineStackOptions {
  stackName: string;
  workDir: string;
  env?: Record<string, string>;
  backend: string;
  config: StackConfig;
  /** Create the stack in the backend when missing (a rollout does; plan and status do not). */
  create?: boolean;
  /** Reports of the edge's own: the engine's output lines, a targeted update that had to widen. */
  report?: (e: RolloutEvent) => void;
  /** Forward the engine's output lines as `engine` events. */
  engineOutput?: boolean;
  /** How long an orphaned engine of this host may take to exit before the run gives up. */
  engineLockDeadlineSeconds?: number;
  /** The run's cancel: an engine step in flight gets the engine's graceful cancel. */
  signal?: AbortSignal;
  /** Tag the engine's processes as this stack's run (a later run stops any left over). */
  tagProcesses?: boolean;
  /**
   * A rollout's hold on the stack: its engines are bound to it where the lease is shared
   * (stack/engine-bind.ts) and a dead run's engine lock is cleared under it (its loss aborts
   * `signal`). Without one (plan, status) no lock is touched.
   */
  lock?: StackLock;
  /**
   * Every `up` declares the state guard (infra/guard.ts) with the token this run read: set
   * where the lease lives in the cluster, which holds nothing before the first node is up.
   */
  guarded?: boolean;
  /**
   * Called during an `up`, as soon as the engine registered the stack's outputs (the new
   * node list and how each node is reached): the node access warms sessions to new nodes
   * while the engine finishes (edges/open.ts). Read-only; its failures are ignored.
   */
  onNodeList?: (state: StoredState) => void;
}

export class EngineStack implements StackEdge {
  /** The stored state as this run last read or wrote it (undefined: read it from the backend). */
  private known?: StackState;
  /**
   * The exported state as read after this run's last change (or at its start): the
   * resources the next change targets, and the list it must find stored. Read in the
   * background while the loop observes, so no export stands between a decision and its `up`.
   */
  private base?: Promise<StateView>;

  /** The dynamic provider each `up` attaches to, loaded before it (stack/warm-provider.ts). */
  private readonly providers: WarmProviders;

  private constructor(
    private readonly stack: Stack,
    private readonly o: EngineStackOptions,
    /** The export taken while the stack was selected (driver.ts openStackReading); prepare() judges it. */
    private firstExport?: Promise<Deployment>,
  ) {
    this.providers = new WarmProviders({
      // The environment the CLI gives the plugins it starts (stack/engine-process.ts).
      env: () => ({
        ...(process.env as Record<string, string>),
        ...this.stack.workspace.envVars,
        PULUMI_AUTOMATION_API: "true",
        ...(o.tagProcesses
          ? { [ENGINE_TAG_VAR]: engineTag(o.backend, o.stackName), [ENGINE_OWNER_VAR]: String(process.pid) }
          : {}),
      }),
      // What the engine would have made diagnostics of: teardown warnings, and the engine's output.
      onLine: (line) => {
        const w = parseTeardownWarning(line);
        if (w) o.report?.({ type: "warning", node: w.node, message: w.message });
        if (o.engineOutput) o.report?.({ type: "engine", line: line.trimEnd() });
      },
    });
  }

  get name(): string {
    return this.o.stackName;
  }

  static async open(o: EngineStackOptions): Promise<EngineStack> {
    // A run that holds its lease beside the state reads the state while the stack opens (prepare).
    const { stack, firstExport } = await openStackReading(
      {
        stackName: o.stackName,
        workDir: o.workDir,
        env: o.env,
        create: o.create,
        program: buildProgram(programInputFor(o.config, [])),
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.tagProcesses ? { tagProcesses: true } : {}),
        bindEngine: o.lock?.holder.engineBound ?? false,
        ...(o.report
          ? { onRepair: (removed: string[]) => o.report!({ type: "warning", message: repairMessage(removed) }) }
          : {}),
      },
      o.lock !== undefined && !o.guarded,
    );
    return new EngineStack(stack, o, firstExport);
  }

  async prepare(): Promise<ClearedOperation[]> {
    const lockLeft = await this.o.lock?.settleEngine(this.stack, this.o.engineLockDeadlineSeconds ?? 420);
    const leftovers = this.o.tagProcesses
      ? await clearEngineLeftovers(this.o.backend, this.o.stackName, this.o.engineLockDeadlineSeconds ?? 420, (e) =>
          this.o.report?.(e),
        )
      : 0;
    // One export at the start serves both clean-ups of what a killed run left. The one taken
    // while the stack opened holds when this run held its lease before it (a lease beside the
    // state; one in the cluster is taken after opening) and no engine was left to change the
    // state meanwhile (no engine lock, no leftover engine); otherwise the state is read now.
    const held = lockLeft === false && leftovers === 0;
    // Awaited either way, so no two exports run at once (and none outlives a failed start: quiesce).
    const early = await this.firstExport?.then(
      (d) => stateOfExport(d),
      () => undefined,
    );
    this.firstExport = undefined;
    const atStart = (held ? early : undefined) ?? (await exportState(this.stack));
    const cleared = await clearPendingOperations(this.stack, atStart);
    // Clearing pending operations rewrote the state: read it again before the first change.
    this.base = cleared.length ? undefined : Promise.resolve(viewOf(atStart));
    this.known = undefined;
    // The run's dynamic provider loads while the loop observes (stack/warm-provider.ts).
    this.providers.prepare();
    return cleared;
  }

  async state(): Promise<StackState> {
    if (this.known) return this.known;
    // Resources of unlisted nodes can only come from a failed or killed `up`: the state is
    // exported at the start of a run and after a failed `up`, not on every pass.
    // The stored state needs the stack's secrets (the nodes' SSH key): a graph-only read has them encrypted.
    const base = await this.baseState();
    const exported = base.plain ? viewOf(await exportState(this.stack)) : base;
    const stored = await storedStateOfExport(this.stack, exported);
    const listed = stored.nodes.map((n) => n.name);
    const orphans = orphanedNodes(exported.resources, listed, (n) => isNodeName(this.o.stackName, n));
    this.known = { ...stored, orphans };
    return this.known;
  }

  async apply(change: NodeListChange): Promise<void> {
    const { prev, next, op, node, teardownEnv } = change;
    assertListTransition(prev, next, op);
    // The stored list, as read after this run's last change under molt's lock, must be the
    // one the change was decided on. The same export says which resources this change targets.
    const { resources, listed, guardToken } = await this.baseState();
    const storedList = listed ?? (await readStoredState(this.stack)).nodes;
    if (canonical(storedList) !== canonical(prev))
      throw new Error("the stored node list changed under this run; stopping without changes");
    const names = [...new Set([...prev, ...next].map((n) => n.name))];
    const plan = targetsFor(resources, node, names);
    // prune-and-surge: one `up` over both nodes' targets (the new node's by name, as a surge's).
    const added = op.kind === "prune-and-surge" ? targetsFor(resources, op.entry.name, names) : undefined;
    // A node that has joined is registered without its join links, and in no order behind the
    // others (infra/node.ts joinsInThisUpdate). The engine carries an untargeted resource over
    // with the dependencies it has stored, registering those first, and then refuses the
    // program's own registration of them ("Duplicate resource URN"). So whatever still stores a
    // link to another node (the node the last change added, a stack made by an older molt) is
    // targeted: registered again without it. One node's resources per change, not the list's.
    const cross = plan ? crossNodeResources(resources, names) : [];
    const targets = plan ? [...new Set([...plan.targets, ...(added?.targets ?? []), ...cross])] : undefined;
    // Only the node this change adds may join; every other one registers without its join.
    const joining = next.filter((n) => !prev.some((p) => p.name === n.name)).map((n) => n.name);
    // The cluster's host files (core/host-files.ts) go to the node that joins, from a node holding them.
    const hostFiles = op.kind === "surge" || op.kind === "prune-and-surge" ? op.hostFiles : undefined;
    const joins = { joining, ...(hostFiles ? { hostFiles } : {}) };
    let record = await this.up(next, targets, teardownEnv, guardToken, joins);
    if (plan && removesNode(op)) {
      // Never a silent skip: the engine leaves a targeted delete undone when an untargeted
      // resource still depends on it. Every resource of the node must be gone: the update's
      // own events show each delete; what they do not show, the state decides.
      const unseen = notShownDeleted(record, plan.nodeResources);
      const left = await this.stillStored(unseen);
      if (left.length > 0) {
        this.o.report?.({
          type: "phase",
          phase: "provision",
          operation: op.kind,
          node,
          ms: 0,
          ok: false,
          detail: `a targeted update left ${left.length} resource(s) of ${node} in place; updating the whole stack`,
        });
        record = await this.up(next, undefined, teardownEnv, this.guardToken, joins);
      }
    }
    await this.remember(record, next);
  }

  async releaseAdopted(entry: NodeEntry): Promise<string[]> {
    const cloud = this.o.config.cloud;
    if (cloud && entry.adopted) {
      const release = cloudProviderOf(cloud.provider)?.adoptedRelease(entry, cloud);
      return release ? [release] : [];
    }
    const lab = this.o.config.lab;
    if (!lab?.loadBalancer || !entry.adopted) return [];
    await detach({ lb: labLbInputs(lab), server: entry.name, address: entry.adopted.address, port: 6443 });
    return ["detached from the load balancer"];
  }

  async destroyOrphans(orphans: string[]): Promise<void> {
    const { resources, listed, guardToken } = await this.baseState();
    const current = (await readStoredState(this.stack)).nodes;
    const names = [...(listed ?? current).map((n) => n.name), ...orphans];
    const targets = new Set<string>();
    const owned = new Set<string>();
    for (const n of orphans) {
      const plan = targetsFor(resources, n, names);
      plan?.targets.forEach((t) => targets.add(t));
      plan?.nodeResources.forEach((u) => owned.add(u));
    }
    // The `up` that left these orphans was killed or failed, maybe after it had re-registered
    // other nodes' resources with the dependencies of the list it was writing (a prune
    // re-registers the nodes that joined through the node it drops): those that still reach
    // another node are targeted too, so they are registered again with the stored list's
    // (a new first node's own commands reach none and keep the killed run's inputs, which is
    // harmless: their dependencies register first) (stack/targets.ts crossNodeResources;
    // without it the engine refused every rerun after a SIGKILL inside a prune-and-surge with
    // "Duplicate resource URN"). Never the other nodes' machines: a targeted `up` leaves them be.
    crossNodeResources(resources, names).forEach((u) => targets.add(u));
    const record = await this.up(current, [...targets], {}, guardToken, { joining: [] });
    await this.remember(record, current);
    const unseen = notShownDeleted(record, [...owned]);
    const left = await this.stillStored(unseen);
    if (left.length)
      throw new Error(
        `a targeted update left ${left.length} resource(s) of ${orphans.join(", ")} in place: ` +
          `${left.map((r) => urnName(r.urn)).join(", ")}`,
      );
  }

  async updateInProgress(): Promise<boolean> {
    const [last] = await this.stack.history(1);
    return last?.result === "in-progress";
  }

  async cancelUpdate(): Promise<void> {
    await this.stack.cancel();
  }

  async quiesce(): Promise<void> {
    this.providers.close();
    // The read after the last change is of no use once the run ends: stopped, not awaited.
    this.stopBackground?.abort();
    await this.base?.catch(() => undefined);
    // A read-ahead no prepare() took (the run stopped before it): it ends by itself.
    await this.firstExport?.catch(() => undefined);
  }

  /** Which of these resources the state still holds (none asked: no export). */
  private async stillStored(urns: string[]): Promise<StateView["resources"]> {
    if (urns.length === 0) return [];
    const { resources } = await exportState(this.stack, { graphOnly: true });
    return resources.filter((r) => urns.includes(r.urn));
  }

  /** Stops the background export of the state (quiesce). */
  private stopBackground?: AbortController;

  /** The state read after this run's last change; read now when there is none (or that read failed). */
  async resourceIds(type: string): Promise<string[]> {
    const { resources } = await this.baseState();
    return resources.filter((r) => r.type === type && r.id).map((r) => r.id!);
  }

  private async baseState(): Promise<StateView> {
    const read = await this.base?.catch(() => undefined);
    if (read) return read;
    const now = exportState(this.stack).then(viewOf);
    this.base = now;
    return now;
  }

  /**
   * One `up` of the program for `nodes`; the known state is forgotten until it succeeds.
   * `env` is set on the workspace for this `up` only (the engine hands it to the dynamic
   * providers); what a node's teardown skipped or tolerated comes back as `warning` events.
   * What the update did comes from its own events (stack/up-events.ts), not a read-back.
   * `joins.joining`: the nodes of `nodes` this `up` may create (the rest have joined), and the
   * host files they get before joining.
   */
  private async up(
    nodes: NodeEntry[],
    targeted: string[] | undefined,
    env: Record<string, string> = {},
    guardExpect = "",
    joins: { joining: string[]; hostFiles?: HostFileCarry } = { joining: [] },
  ): Promise<UpRecord> {
    // Guarded: the state must still hold the token this run read (a fresh one per `up`).
    const guard = this.o.guarded ? { expect: guardExpect, token: randomUUID() } : undefined;
    const target = targeted && guard ? [...targeted, GUARD_TARGET] : targeted;
    this.stack.workspace.program = buildProgram(
      programInputFor(this.o.config, nodes, joins.joining, joins.hostFiles),
      guard,
    );
    const clientKey = this.known?.sshPrivateKey;
    const before = this.known;
    this.known = undefined;
    this.base = undefined;
    const report = this.o.report;
    const onOutput =
      this.o.engineOutput && report ? (line: string) => report({ type: "engine", line: line.trimEnd() }) : undefined;
    const recorder = new UpRecorder();
    const onNodeList = this.o.onNodeList;
    const names = nodes.map((n) => n.name);
    const onEvent = (e: EngineEvent) => {
      recorder.onEvent(e);
      // A new node is connected as soon as its component says how (its machine answers),
      // while its join runs; the stack's outputs, at the end of the `up`, say it for any provider.
      const created = onNodeList && before ? createdNodeEndpoint(e, names) : undefined;
      if (created && onNodeList && before)
        onNodeList({
          ...before,
          nodes,
          endpoints: [...before.endpoints.filter((x) => x.name !== created.name), created],
        });
      const molt = onNodeList && clientKey ? stackOutputOf(e, "molt") : undefined;
      if (molt && onNodeList && clientKey)
        void parseStoredState(this.stack, {
          molt: { value: molt, secret: false },
          sshPrivateKey: { value: clientKey, secret: true },
        }).then(onNodeList, () => undefined);
      const w = teardownWarning(e);
      if (w) report?.({ type: "warning", node: w.node, message: w.message });
      const step = resourceStep(e);
      if (step) report?.(step);
    };
    const vars = this.stack.workspace.envVars;
    // The run's dynamic provider takes this `up`'s environment; none: the engine starts one.
    const provider = await this.providers.take(env);
    const upEnv = { ...env, ...provider?.env };
    const saved = Object.keys(upEnv).map((k) => [k, vars[k]] as const);
    Object.assign(vars, upEnv);
    let ok = false;
    try {
      await upWithoutReadback(this.stack, {
        ...(onOutput ? { onOutput } : {}),
        onEvent,
        ...(target ? { target } : {}),
      });
      ok = true;
    } catch (e) {
      // What the failed `up` did is in its events (a prune-and-surge tells its halves apart).
      // Only the engine's own failures: molt's errors (a cancel, a lock, a passphrase) keep their kind.
      if (e instanceof EngineCancelledError || !(e instanceof CommandError)) throw e;
      const record = recorder.record();
      // Another run changed the stack since this run read it: stop, and touch nothing more.
      if (record.failed.some((u) => urnName(u) === GUARD_NAME))
        throw new StateChangedByAnotherRunError(this.o.stackName);
      // Another update holds the stack (no step ran): not a failed change of this run's.
      if (record.finished.size === 0 && isUpdateInProgress(e.message))
        throw new AnotherUpdateInProgressError(this.o.stackName, firstEngineError(e.message));
      throw new UpFailedError(e.message, record);
    } finally {
      for (const [k, v] of saved)
        if (v === undefined) delete vars[k];
        else vars[k] = v;
      // It serves the next `up` too, unless this one did not succeed (stack/warm-provider.ts).
      provider?.end(ok);
    }
    this.clientKey = clientKey;
    if (guard) this.guardToken = guard.token;
    return recorder.record();
  }

  /** The guard token this run's last successful `up` wrote. */
  private guardToken = "";

  /** The client key as this run last read it (the stack's outputs hold it as a secret the events mask). */
  private clientKey?: string;

  /**
   * While this run holds the stack's lock, the list it last wrote is the list in the
   * backend: taken from the update's events when they are complete and carry the `molt`
   * output (and the client key did not change), else read back. The state's graph (no
   * secrets decrypted) is then exported in the background for the next change.
   */
  private async remember(record: UpRecord, nodes: NodeEntry[]): Promise<void> {
    const molt = record.complete ? record.stackOutputs?.molt : undefined;
    const keyChanged = [...record.changed].some((u) => urnName(u) === CLIENT_KEY_NAME);
    let stored: StoredState | undefined;
    if (molt !== undefined && typeof molt === "object" && this.clientKey && !keyChanged) {
      stored = await parseStoredState(this.stack, {
        molt: { value: molt, secret: false },
        sshPrivateKey: { value: this.clientKey, secret: true },
      }).catch(() => undefined);
      // The events must say what this run wrote: anything else is read back.
      if (stored && canonical(stored.nodes) !== canonical(nodes)) stored = undefined;
    }
    stored ??= await readStoredState(this.stack);
    this.known = { ...stored, orphans: [] };
    this.stopBackground = new AbortController();
    const after = exportState(this.stack, { graphOnly: true, signal: this.stopBackground.signal }).then(viewOf);
    after.catch(() => undefined);
    this.base = after;
  }
}

/** One output of the root stack resource, when this event registers them (up-events.ts reads the same). */
function stackOutputOf(e: EngineEvent, name: string): unknown {
  const m = e.resOutputsEvent?.planning ? undefined : e.resOutputsEvent?.metadata;
  if (m?.type !== "pulumi:pulumi:Stack") return undefined;
  const v = m.new?.outputs?.[name];
  return v !== null && typeof v === "object" ? v : undefined;
}

/** Does the change drop `node` from the list (so every resource of it must be gone after)? */
function removesNode(op: NodeListChange["op"]): boolean {
  return ["prune", "rollback", "retire-adopted", "prune-and-surge"].includes(op.kind);
}

/** The name of the stack's SSH client key resource (infra/lab/program.ts and the clouds' programs). */
const CLIENT_KEY_NAME = "ssh-client-key";

/**
 * Only three shapes of change to the node list exist: append one new node, drop one node,
 * or drop one and append one (`prune-and-surge`).
 */
export function assertListTransition(prev: NodeEntry[], next: NodeEntry[], op: Operation): void {
  const prevNames = prev.map((n) => n.name);
  const nextNames = next.map((n) => n.name);
  const appended = nextNames.length === prevNames.length + 1 && prevNames.every((n, i) => nextNames[i] === n);
  const dropped = nextNames.length === prevNames.length - 1 && nextNames.every((n) => prevNames.includes(n));
  const kept = prevNames.filter((n) => op.kind === "prune-and-surge" && n !== op.node);
  const replaced =
    op.kind === "prune-and-surge" &&
    prevNames.includes(op.node) &&
    nextNames.length === prevNames.length &&
    kept.every((n, i) => nextNames[i] === n) &&
    nextNames[nextNames.length - 1] === op.entry.name &&
    !prevNames.includes(op.entry.name);
  const sameEntries = next.every((n) => {
    const p = prev.find((x) => x.name === n.name);
    return !p || JSON.stringify(p) === JSON.stringify(n);
  });
  const ok =
    sameEntries &&
    (((op.kind === "surge" || op.kind === "create-first") &&
      appended &&
      next[next.length - 1].name === op.entry.name) ||
      ((op.kind === "prune" || op.kind === "rollback" || op.kind === "retire-adopted") &&
        dropped &&
        !nextNames.includes(op.node)) ||
      replaced);
  if (!ok)
    throw new Error(
      `refusing to apply a node list that is not "${op.kind}" of the stored list: [${prevNames}] -> [${nextNames}]`,
    );
}

/** JSON with object keys sorted: the engine's export and molt's parse order keys differently. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );
}

/** The engine's error line about the lock, for a message. */
function firstEngineError(message: string): string {
  const line = message.split("\n").find((l) => isUpdateInProgress(l)) ?? message.split("\n")[0];
  return line
    .replace(/^\s*error:\s*/, "")
    .trim()
    .slice(0, 200);
}
