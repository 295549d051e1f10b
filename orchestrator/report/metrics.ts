// --metrics-file: a run's figures in the Prometheus text format, for node_exporter's
// textfile collector (written whole, then renamed into place, so a scrape never reads half
// a file). Made with prom-client, the Prometheus client library for Node.js.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { Gauge, Registry } from "prom-client";
import type { RolloutEvent } from "../events";
import type { RolloutResultKind } from "../core/model";

type Summary = Extract<RolloutEvent, { type: "summary" }>;

const RESULTS: RolloutResultKind[] = ["succeeded", "noop", "failed", "paused", "refused", "rolled-back", "cancelled"];

/** The value of molt_rollout_last_success_timestamp_seconds for `stack` in an earlier file, if any. */
export function previousLastSuccess(text: string, stack: string): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^molt_rollout_last_success_timestamp_seconds\{([^}]*)\}\s+(\S+)/.exec(line);
    if (m && m[1].includes(`stack="${stack}"`)) {
      const v = Number(m[2]);
      return Number.isFinite(v) ? v : undefined;
    }
  }
  return undefined;
}

/** The metrics of one finished run; `lastSuccess` carries an earlier success over a run that did not succeed. */
export async function metricsText(s: Summary, endedAt: number, lastSuccess?: number): Promise<string> {
  const registry = new Registry();
  const g = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames: ["stack", ...labelNames], registers: [registry] });
  const stack = s.stack;
  const result = g("molt_rollout_result", "1 for the result of the last molt rollout, 0 for the others", ["result"]);
  for (const r of RESULTS) result.set({ stack, result: r }, r === s.result ? 1 : 0);
  g("molt_rollout_duration_seconds", "Wall time of the last molt rollout").set({ stack }, s.wallMs / 1000);
  const phases = g("molt_rollout_phase_duration_seconds", "Time the last rollout spent per phase", ["phase"]);
  for (const [phase, ms] of Object.entries(s.phases)) phases.set({ stack, phase }, ms / 1000);
  g("molt_rollout_nodes_replaced", "Nodes the last rollout retired (replaced)").set({ stack }, s.replaced.length);
  g("molt_rollout_operations", "Changes the last rollout made").set({ stack }, s.operations);
  g("molt_rollout_last_run_timestamp_seconds", "When the last rollout ended (Unix time)").set(
    { stack },
    Math.floor(endedAt / 1000),
  );
  const success = s.result === "succeeded" || s.result === "noop" ? Math.floor(endedAt / 1000) : lastSuccess;
  if (success !== undefined)
    g(
      "molt_rollout_last_success_timestamp_seconds",
      "When a rollout last ended converged: succeeded or nothing to do (Unix time)",
    ).set({ stack }, success);
  return registry.metrics();
}

/** Writes the run's metrics to `path` (atomically); keeps the last success time of an earlier file. */
export async function writeMetricsFile(path: string, s: Summary, endedAt = Date.now()): Promise<void> {
  let previous: number | undefined;
  try {
    previous = previousLastSuccess(readFileSync(path, "utf8"), s.stack);
  } catch {
    previous = undefined;
  }
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, await metricsText(s, endedAt, previous));
  renameSync(tmp, path);
}
