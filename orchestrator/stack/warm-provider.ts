// A dynamic provider loaded once per run, before the first `up` that uses it.
//
// Every `up` makes the engine start @pulumi/pulumi's Node.js dynamic provider, a node process
// that loads @pulumi/pulumi before it answers: about 0.45 s of every `up` on the lab (engine
// traces: 0.42-0.56 s of a prune's 1.5 s), on the critical path of every surge and prune.
// Here molt starts that process itself when a rollout starts, and each `up` attaches to it
// (the engine's PULUMI_DEBUG_PROVIDERS: it dials the port instead of starting the plugin).
// Loading one after each `up` instead cost as much as it saved on a 2-core machine: it ran
// beside the observation of the node just made (the gate's first pass took 530-1,173 ms,
// not 160-300). One process serves the run's `up`s one after another:
//   - each `up`'s environment (molt's teardown list) is handed over before it starts
//     (stack/provider-host.ts);
//   - an `up` that did not succeed (failed, cancelled, its engine killed) ends it, as the
//     engine ends the one it starts, so nothing it still does outlives that `up`; the next
//     `up` gets a new one;
//   - its stderr, which the engine would turn into diagnostics, is read here and given to
//     `onLine` (molt's teardown warnings are parsed from it, stack/edge.ts);
//   - it lives as the one the engine starts would: once molt is gone (its stdin closes), it
//     serves the engine attached to it until that engine lets go (an engine not bound to molt
//     outlives it, stack/engine-bind.ts), and exits at once if none is (provider-host.ts);
//   - tagged (MOLT_ENGINE_OF) like every engine process, so a later run stops one left over
//     (stack/leftovers.ts).
// Where it cannot be started or does not answer in time, the engine starts its own, as before.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** How long a provider may take to load (print its port), and to take its environment. */
const LOAD_MS = 60_000;
const READY_MS = 5_000;

export interface WarmProviderOptions {
  /** The environment of the engine's processes (workspace variables, tag, PATH), as the CLI gets it. */
  env: () => Record<string, string>;
  /** Each line the provider writes on stderr (the engine would report it as a diagnostic). */
  onLine?: (line: string) => void;
}

/** A loaded provider, its port known; `nextLine` reads its stdout. */
interface Loaded {
  child: ChildProcess;
  port: number;
  nextLine: (timeoutMs: number) => Promise<string | undefined>;
}

/** The provider one `up` attaches to; `end(ok)` once the `up` has ended. */
export interface AttachedProvider {
  /** The engine's environment for this `up`: attach instead of start. */
  env: Record<string, string>;
  /** Its process (tests, and what a later run might find of it: it is tagged). */
  pid: number;
  /** ok: the `up` succeeded, the provider serves the next one; otherwise it is ended. */
  end(ok: boolean): void;
}

export class WarmProviders {
  private current?: Promise<Loaded | undefined>;
  private readonly alive = new Set<ChildProcess>();

  constructor(private readonly o: WarmProviderOptions) {}

  /** Linux: the provider reads /proc/net/tcp to know whether an engine is attached (else the engine starts its own). */
  static usable(): boolean {
    return process.platform === "linux";
  }

  /** Starts loading the provider the next `up` takes, unless one is loaded or loading. */
  prepare(): void {
    if (this.current || !WarmProviders.usable()) return;
    this.current = this.load();
    this.current.catch(() => undefined);
  }

  /**
   * The provider for an `up` with `upEnv` (loading one now if none is), or undefined: the
   * engine starts its own.
   */
  async take(upEnv: Record<string, string>): Promise<AttachedProvider | undefined> {
    this.prepare();
    const current = this.current;
    const loaded = await current?.catch(() => undefined);
    const drop = () => {
      if (this.current === current) this.current = undefined;
      if (loaded) this.kill(loaded.child);
    };
    if (!loaded) {
      drop();
      return undefined;
    }
    const ready = await handOver(loaded, upEnv).catch(() => false);
    if (!ready) {
      drop();
      return undefined;
    }
    return {
      env: { PULUMI_DEBUG_PROVIDERS: `pulumi-nodejs:${loaded.port}` },
      pid: loaded.child.pid!,
      end: (ok) => {
        if (!ok) drop();
      },
    };
  }

  /** Kills every provider this run started (none serves an `up` once the run stops). */
  close(): void {
    this.current = undefined;
    for (const c of this.alive) this.kill(c);
  }

  private kill(child: ChildProcess): void {
    this.alive.delete(child);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }

  private load(): Promise<Loaded | undefined> {
    const host = join(__dirname, "provider-host.js");
    const env = {
      ...this.o.env(),
      // What the engine sets for the Node.js dynamic provider it starts (pkg/resource/plugin).
      PULUMI_NODEJS_PROJECT: "molt",
      PULUMI_PROJECT: "molt",
    };
    // A session of its own, as the engine's: a Ctrl-C in molt's terminal does not reach it (the
    // engine's graceful cancel lets the step it serves finish).
    const child = spawn(process.execPath, [host], {
      detached: true,
      env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.alive.add(child);
    child.once("exit", () => this.alive.delete(child));
    // A provider that died takes its stdin with it: the write fails, take() says so (undefined).
    child.stdin!.on("error", () => undefined);
    // An idle provider does not keep molt alive (a timer does while molt waits for one).
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void })?.unref?.();
    const err = createInterface({ input: child.stderr! });
    err.on("line", (line) => this.o.onLine?.(line));
    // One reader of its stdout: its port, then "ready".
    const queued: string[] = [];
    let waiter: ((line: string | undefined) => void) | undefined;
    const out = createInterface({ input: child.stdout! });
    out.on("line", (line) => {
      if (waiter) waiter(line);
      else queued.push(line);
    });
    out.once("close", () => waiter?.(undefined));
    const nextLine = (timeoutMs: number) =>
      new Promise<string | undefined>((resolve) => {
        const queuedLine = queued.shift();
        if (queuedLine !== undefined) return resolve(queuedLine);
        const timer = setTimeout(() => done(undefined), timeoutMs);
        const done = (line: string | undefined) => {
          clearTimeout(timer);
          waiter = undefined;
          resolve(line);
        };
        waiter = done;
      });
    child.once("error", () => waiter?.(undefined));
    return nextLine(LOAD_MS).then((line) => {
      const port = Number(line?.trim());
      if (Number.isInteger(port) && port > 0) return { child, port, nextLine };
      this.kill(child);
      return undefined;
    });
  }
}

/** Gives a loaded provider its `up`'s environment; true once it says it is ready. */
async function handOver(loaded: Loaded, env: Record<string, string>): Promise<boolean> {
  const { child } = loaded;
  if (child.exitCode !== null || child.signalCode !== null || !child.stdin?.writable) return false;
  child.stdin.write(`${JSON.stringify(env)}\n`);
  return (await loaded.nextLine(READY_MS))?.trim() === "ready";
}
