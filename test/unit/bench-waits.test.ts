// The bench's split of a run's waiting time by what it waited for (bench/waits.ts).
import * as assert from "node:assert/strict";
import { waitsByKind } from "../../bench/waits";
import type { RolloutEvent } from "../../orchestrator/events";

type E = RolloutEvent & { at: number };
const wait = (at: number, key: string, node?: string): E =>
  ({
    type: "decision",
    pass: 1,
    operation: { kind: "wait", key, reason: "r", ...(node ? { node } : {}) },
    at,
  }) as E;
const timed = (at: number, ms: number): E => ({ type: "phase", phase: "wait", operation: "wait", ms, ok: true, at });
const drain: E = { type: "decision", pass: 2, operation: { kind: "drain", node: "cp-1" }, at: 0 } as E;

describe("bench: waits by kind (bench/waits.ts)", () => {
  it("counts each wait under the key the decision before it chose, longest kind first", () => {
    const events: E[] = [
      wait(100, "lb:cp-4", "cp-4"),
      timed(700, 600),
      wait(800, "lb:cp-4", "cp-4"),
      timed(900, 100),
      drain,
      // A refused call retried: a wait phase with no wait decision before it.
      timed(1_400, 500),
      wait(1_500, "addons"),
      timed(3_500, 2_000),
      { type: "phase", phase: "kube", operation: "drain", node: "cp-1", ms: 300, ok: true, at: 3_800 },
    ];
    assert.deepEqual(waitsByKind(events), [
      { kind: "addons", ms: 2_000, count: 1 },
      { kind: "lb", ms: 700, count: 2 },
      { kind: "retry", ms: 500, count: 1 },
    ]);
  });

  it("has nothing to say about a run that never waited", () => {
    assert.deepEqual(waitsByKind([drain]), []);
  });
});
