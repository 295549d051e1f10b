// Loaded with `--require` (NODE_OPTIONS) into every Node process of the earlier commit's bench
// (bench/then.ts): its orchestrator, its probe and the engine's dynamic providers, which run
// the join and reset scripts. Appends one line to MOLT_BENCH_THEN_TRACE per SSH command when
// its channel closes (a provider killed by the engine writes nothing at exit), and per rollout
// of the bench process when it ends. It changes nothing the code does: it wraps ssh2's
// Client.exec, once ssh2 is loaded, and the orchestrator's rollout export, to note the time.
import { appendFileSync } from "node:fs";
import Module, { createRequire } from "node:module";
import { basename, dirname, join } from "node:path";

export type ThenTraceLine =
  { kind: "exec"; process: string; at: number; ms: number } | { kind: "rollout"; start: number; end: number };

const out = process.env.MOLT_BENCH_THEN_TRACE;
const note = (l: ThenTraceLine) => appendFileSync(out!, JSON.stringify(l) + "\n");

function traceExec(Client: { prototype: Record<string, unknown> }, proc: string): void {
  const exec = Client.prototype.exec as (...a: unknown[]) => unknown;
  Client.prototype.exec = function (this: unknown, ...args: unknown[]) {
    const at = Date.now();
    const cb = args[args.length - 1];
    if (typeof cb === "function")
      args[args.length - 1] = (err: unknown, stream: { on(e: string, f: () => void): void } | undefined) => {
        stream?.on("close", () => note({ kind: "exec", process: proc, at, ms: Date.now() - at }));
        return (cb as (e: unknown, s: unknown) => unknown)(err, stream);
      };
    return exec.apply(this, args);
  };
}

if (out) {
  // "bench/run.js", "bench/probe.js", "dynamic-provider/index.js" (the engine's provider).
  const argv1 = process.argv[1] ?? "node";
  const proc = join(basename(dirname(argv1)), basename(argv1));
  // ssh2 patched when a process first loads it, so a process that never does pays nothing.
  const m = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const load = m._load;
  let patched = false;
  m._load = function (this: unknown, request: string, ...rest: unknown[]) {
    const exported = load.call(this, request, ...rest);
    if (!patched && request === "ssh2") {
      patched = true;
      traceExec((exported as { Client: { prototype: Record<string, unknown> } }).Client, proc);
    }
    return exported;
  };
  if (/bench[/\\]run\.js$/.test(process.argv[1] ?? "")) {
    // The bench's rollouts (create, then the upgrade): it reads `rollout` off the module at each call.
    const mod = createRequire(join(process.cwd(), "package.json"))("./dist/orchestrator/rollout.js") as Record<
      string,
      unknown
    >;
    const rollout = mod.rollout as (...a: unknown[]) => Promise<unknown>;
    mod.rollout = async (...args: unknown[]) => {
      const start = Date.now();
      try {
        return await rollout(...args);
      } finally {
        note({ kind: "rollout", start, end: Date.now() });
      }
    };
  }
}
