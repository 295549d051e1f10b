// One run of a command against one stack, opened the same way by every command (rollout,
// plan/status, verify, disown, adopt): the stack's config, its backend and the backend's
// object store (opened once), the stack's lease, the lab's claim, the edges, the run's
// clock and where its events go. What was taken is given back in one place, `close()`, in
// the order the parts need: no engine command outlives the run, the lease is released
// while the nodes' sessions are still open (a lease in the cluster is given up through
// them), then the sessions close.
//
//   const run = await openRun({ stack, workDir, env, edges, emit });
//   try { await run.hold("verify"); const edges = await run.open(); ... } finally { await run.close(); }
import { existsSync } from "node:fs";
import { loadStackConfig, resolveLabImage, type StackConfig } from "../config";
import type { Edges, StackEdge, StackState } from "../core/edges";
import type { ClusterOwner } from "../core/ownership";
import { SshNodeAccess } from "../edges/nodes";
import { openEdges, type EdgeFactory, type EdgeOptions } from "../edges/open";
import type { RolloutEvent } from "../events";
import { holdStack, type StackLock } from "../lease/hold";
import { claimStackLab } from "../lease/lab-claim";
import { RunClock } from "../loop/timing";
import { fileBackendDir } from "../backend/file-sidecars";
import type { ObjectStore } from "../backend/object-store";
import { S3Store } from "../backend/s3";
import { openStore, ownerBackend, requireStore } from "../backend/store";
import { checkpointExists } from "../stack/checkpoint";
import { BackendError, StackNotFoundError } from "../stack/driver";
import { backendUrl, repoRoot } from "../stack/engine";
import { checkProviderPlugins } from "../stack/plugins";

export interface RunOptions {
  stack: string;
  /** Directory holding Pulumi.yaml and stacks/ (MOLT_PROJECT_DIR, else molt's repository root). */
  workDir?: string;
  /** Extra environment for the engine and the backend (e.g. PULUMI_BACKEND_URL, credentials). */
  env?: Record<string, string>;
  /** The edges the run talks to; tests pass fakes. */
  edges?: EdgeFactory;
  /** The caller's cancel; once the lease is held, `run.signal` aborts on either. */
  signal?: AbortSignal;
  /** Where the lease's and the edges' own events go. */
  emit?: (e: RolloutEvent) => void;
  /**
   * plan and status: nothing is written. The default backend's folder is not made, a backend
   * the user named is checked readable first, and a stack the backend has no checkpoint of
   * is opened as an empty stack without starting the engine.
   */
  readOnly?: boolean;
}

/** What `open` adds for a run that may change the stack (a rollout). */
export interface ChangeOptions {
  engineOutput?: boolean;
  engineLockDeadlineSeconds?: number;
}

export interface Run {
  readonly stack: string;
  readonly workDir: string;
  readonly env?: Record<string, string>;
  /** The stack's config; with the lab's owner once the lab is claimed (`claimLab`). */
  readonly cfg: StackConfig;
  readonly backend: string;
  /** This stack as the cluster's ownership marker names its owner. */
  readonly self: ClusterOwner;
  /** The backend's object store, opened once; undefined where molt has none (Pulumi Cloud, gs://). */
  readonly store: ObjectStore | undefined;
  readonly emit: (e: RolloutEvent) => void;
  /** The caller's signal, and the lease's once it is held. */
  readonly signal: AbortSignal | undefined;
  /** The lease, once `hold` took it. */
  readonly lease: StackLock | undefined;
  /** The edges, once `open` opened them. */
  readonly edges: Edges | undefined;
  /** The run's clock, started when the lease is taken. */
  readonly clock: RunClock;
  /** The store for records that need one (BackendError where the backend has none). */
  requireStore(what: string): ObjectStore;
  /** A run that may `up` needs the provider's engine plugins, which molt never downloads during a run. */
  checkPlugins(): void;
  /** Makes the default backend's folder (hold and open do): before a run's first write, not at its start. */
  makeBackend(): void;
  /** Takes the stack's lease (lease/hold.ts) in `command`'s name. */
  hold(command: string): Promise<StackLock>;
  /**
   * A lab stack's lab is its own (lease/lab-claim.ts): another stack's is refused, before
   * anything changes; `warn` hears of a claim taken over from a stack that holds nothing.
   */
  claimLab(warn: (message: string) => void): StackConfig;
  /**
   * Opens the edges. Read-only (plan, status, verify, disown) unless `change` is given; with
   * the lease held, its part in the cluster is taken at once unless `clusterLease` is false.
   */
  open(o?: { change?: ChangeOptions; clusterLease?: boolean }): Promise<Edges>;
  /** Gives back what was taken, in order, every step even when an earlier one fails; safe to call more than once. */
  close(): Promise<void>;
}

export function projectDir(workDir?: string): string {
  return workDir ?? process.env.MOLT_PROJECT_DIR ?? repoRoot;
}

/** A stack's config as every command reads it: validated, with the lab's image resolved. */
export function stackConfig(workDir: string, stack: string): StackConfig {
  return resolveLabImage(loadStackConfig(workDir, stack));
}

export async function openRun(o: RunOptions): Promise<Run> {
  const workDir = projectDir(o.workDir);
  let cfg = stackConfig(workDir, o.stack);
  const emit = o.emit ?? (() => undefined);
  // The default backend's folder is made when the run first holds or opens the stack, not
  // before: a run refused at its start (bad input, outside its window) writes nothing.
  const named = o.env?.PULUMI_BACKEND_URL ?? (o.readOnly ? process.env.PULUMI_BACKEND_URL : undefined);
  const backend = named ?? backendUrl({ create: false });
  const makeBackend = () => {
    if (named === undefined && !o.readOnly) backendUrl();
  };
  const store = openStore(backend, o.env);
  if (named !== undefined && o.readOnly) await checkReadable(backend, store);
  let lease: StackLock | undefined;
  let edges: Edges | undefined;
  let signal = o.signal;
  let clock = new RunClock(emit);
  let changing = false;
  let closed = false;
  const factory = o.edges ?? openEdges;
  const base = (): EdgeOptions => ({ stackName: o.stack, workDir, env: o.env, backend, config: cfg });
  const run: Run = {
    stack: o.stack,
    workDir,
    env: o.env,
    get cfg() {
      return cfg;
    },
    backend,
    self: { stack: o.stack, backend: ownerBackend(backend) },
    store,
    emit,
    get signal() {
      return signal;
    },
    get lease() {
      return lease;
    },
    get edges() {
      return edges;
    },
    get clock() {
      return clock;
    },
    requireStore: (what) => store ?? requireStore(backend, what, o.env),
    makeBackend,
    checkPlugins: () => {
      if (!o.edges) checkProviderPlugins(cfg.intent.provider, o.env);
    },
    hold: async (command) => {
      makeBackend();
      lease = await holdStack({ backend, stack: o.stack, cfg, emit, env: o.env, command, store });
      signal = o.signal ? AbortSignal.any([o.signal, lease.signal]) : lease.signal;
      clock = new RunClock(emit);
      return lease;
    },
    claimLab: (warn) => (cfg = claimStackLab(cfg, o.stack, backend, warn)),
    open: async ({ change, clusterLease = true } = {}) => {
      makeBackend();
      if (o.readOnly) return (edges = await openReadOnly(factory, base(), !o.edges && store));
      changing = change !== undefined;
      edges = await factory(
        change
          ? {
              ...base(),
              report: emit,
              ...change,
              signal,
              tagProcesses: true,
              ...(lease ? { lock: lease, guarded: lease.guarded } : {}),
            }
          : { ...base(), create: false },
      );
      // A lease in the cluster is taken before anything is read for a change.
      if (lease && clusterLease) await lease.holdInCluster(edges);
      return edges;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await everyStep(`closing the run on stack ${o.stack}`, [
        // No engine command of this run outlives it (stack/edge.ts reads the state in the background).
        async () => {
          if (changing) await edges?.stack.quiesce?.();
        },
        // Before the nodes' sessions close: a lease in the cluster is released through them.
        async () => lease?.release(),
        async () => edges?.nodes.close(),
      ]);
    },
  };
  return run;
}

/**
 * Runs every step in order whatever the earlier ones did: a failed quiesce must not leave the
 * lease held nor the nodes' sessions open. One failure is thrown as it is; several as one
 * error that names them all, the first as its cause.
 */
export async function everyStep(what: string, steps: (() => Promise<unknown>)[]): Promise<void> {
  const errors: unknown[] = [];
  for (const step of steps)
    try {
      await step();
    } catch (e) {
      errors.push(e);
    }
  if (errors.length === 1) throw errors[0];
  const firstLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).split("\n")[0];
  if (errors.length > 1)
    throw new AggregateError(errors, `${what}: ${errors.length} steps failed: ${errors.map(firstLine).join("; ")}`, {
      cause: errors[0],
    });
}

/**
 * plan and status. A stack the backend has no checkpoint of is not opened: the engine would
 * write to the backend (.pulumi/meta.yaml) to find that out.
 */
async function openReadOnly(factory: EdgeFactory, o: EdgeOptions, store: ObjectStore | false | undefined) {
  const empty = (): Edges => ({ stack: new EmptyStack(o.stackName), nodes: new SshNodeAccess() });
  try {
    if (store !== false && (await checkpointExists(store, o.stackName)) === false) return empty();
    return await factory({ ...o, create: false });
  } catch (e) {
    if (!(e instanceof StackNotFoundError)) throw e;
    return empty();
  }
}

/** Whether the stack was opened, or is one the backend does not hold (read-only runs). */
export function stackExists(edges: Edges): boolean {
  return !(edges.stack instanceof EmptyStack);
}

/**
 * The backend checked before the engine opens it, as a rollout's lease checks it, writing nothing:
 * the engine's own answer to a missing bucket, refused credentials or an unreachable endpoint is an
 * SDK trace (exit 1), and to a missing folder "code: 1"; this says what is wrong and what to do
 * (BackendError, exit 2). A bucket: HEAD (read-only); a folder: that it exists.
 */
async function checkReadable(backend: string, store: ObjectStore | undefined): Promise<void> {
  if (store instanceof S3Store) return store.check();
  const dir = fileBackendDir(backend);
  if (dir && !existsSync(dir)) throw new BackendError(backend, `the folder ${dir} does not exist`);
}

/** A stack that does not exist yet: no nodes, nothing to change. */
class EmptyStack implements StackEdge {
  constructor(readonly name: string) {}
  async prepare() {
    return [];
  }
  async state(): Promise<StackState> {
    return { nodes: [], endpoints: [], sshUser: "root", orphans: [] };
  }
  async apply(): Promise<void> {
    throw new Error(`stack ${this.name} does not exist`);
  }
  async destroyOrphans(): Promise<void> {
    throw new Error(`stack ${this.name} does not exist`);
  }
  async releaseAdopted(): Promise<string[]> {
    throw new Error(`stack ${this.name} does not exist`);
  }
}
