// Loaded with `node --require` into the earlier commit's bench (bench/then.ts): records when
// each of its rollouts ran and each SSH command it sent, and writes them to
// MOLT_BENCH_THEN_TRACE when the process exits. It changes nothing the bench does: it wraps
// ssh2's Client.exec and the orchestrator's rollout export to note the time, no more.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

export interface ThenTrace {
  rollouts: { start: number; end: number }[];
  /** Each SSH command: when it was sent and how long until its channel closed. */
  execs: { at: number; ms?: number }[];
}

const out = process.env.MOLT_BENCH_THEN_TRACE;
// The bench process only, not the probe it forks (which inherits --require).
if (out && /bench[/\\]run\.js$/.test(process.argv[1] ?? "")) {
  const trace: ThenTrace = { rollouts: [], execs: [] };
  // The modules of the bench being traced (its node_modules, its dist), not this file's.
  const load = createRequire(join(process.cwd(), "package.json"));
  const ssh2 = load("ssh2") as { Client: { prototype: Record<string, unknown> } };
  const exec = ssh2.Client.prototype.exec as (...a: unknown[]) => unknown;
  ssh2.Client.prototype.exec = function (this: unknown, ...args: unknown[]) {
    const x: ThenTrace["execs"][number] = { at: Date.now() };
    trace.execs.push(x);
    const cb = args[args.length - 1];
    if (typeof cb === "function")
      args[args.length - 1] = (err: unknown, stream: { on(e: string, f: () => void): void } | undefined) => {
        stream?.on("close", () => (x.ms = Date.now() - x.at));
        return (cb as (e: unknown, s: unknown) => unknown)(err, stream);
      };
    return exec.apply(this, args);
  };
  const mod = load("./dist/orchestrator/rollout.js") as Record<string, unknown>;
  const rollout = mod.rollout as (...a: unknown[]) => Promise<unknown>;
  mod.rollout = async (...args: unknown[]) => {
    const w = { start: Date.now(), end: 0 };
    trace.rollouts.push(w);
    try {
      return await rollout(...args);
    } finally {
      w.end = Date.now();
    }
  };
  process.on("exit", () => writeFileSync(out, JSON.stringify(trace)));
}
