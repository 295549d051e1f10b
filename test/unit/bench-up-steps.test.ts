// The bench's split of a targeted `up` (bench/up-steps.ts): to the first resource step, the
// steps, after the last one.
import * as assert from "node:assert/strict";
import { upSteps } from "../../bench/up-steps";
import type { RolloutEvent } from "../../orchestrator/events";

type E = RolloutEvent & { at: number };
const res = (at: number, status: "started" | "done" | "failed", resource = "m"): E => ({
  type: "resource",
  op: "delete",
  resource,
  kind: "molt:lab:Machine",
  status,
  at,
});
const phase = (at: number, ms: number, operation: "prune" | "surge", node: string, ok = true): E => ({
  type: "phase",
  phase: "provision",
  operation,
  node,
  ms,
  ok,
  at,
});

describe("bench: a targeted up's steps (bench/up-steps.ts)", () => {
  it("splits each prune into engine start, steps and the end", () => {
    const events: E[] = [
      res(10_500, "started", "surge-machine"), // another `up`'s step
      phase(11_000, 5_000, "surge", "cp-4"),
      res(14_000, "started", "lb"),
      res(14_100, "started", "machine"),
      res(14_400, "done", "lb"),
      res(14_700, "done", "machine"),
      phase(15_500, 4_000, "prune", "cp-1"),
    ];
    assert.deepEqual(upSteps(events, "prune"), [
      { node: "cp-1", upMs: 4_000, toFirstStepMs: 2_500, stepsMs: 700, afterLastStepMs: 800 },
    ]);
  });

  it("leaves out failed `up`s and `up`s without a step", () => {
    const events: E[] = [res(1_000, "started"), res(1_500, "failed"), phase(2_000, 1_500, "prune", "cp-1", false)];
    assert.deepEqual(upSteps(events, "prune"), []);
    assert.deepEqual(upSteps([phase(2_000, 1_500, "prune", "cp-2")], "prune"), []);
  });
});
