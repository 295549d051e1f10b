// The earlier commit's SSH commands during its upgrade, from the lines bench/then-trace.ts wrote.
import * as assert from "node:assert/strict";
import { upgradeSshOf } from "../../bench/then";
import type { ThenTraceLine } from "../../bench/then-trace";

describe("bench then: SSH commands of the upgrade", () => {
  const exec = (process: string, at: number, ms: number): ThenTraceLine => ({ kind: "exec", process, at, ms });

  it("counts only the commands within the last rollout, by process", () => {
    const trace: ThenTraceLine[] = [
      exec("bench/run.js", 50, 999), // the create rollout's
      { kind: "rollout", start: 0, end: 100 },
      exec("bench/run.js", 150, 300),
      exec("dynamic-provider/index.js", 160, 500),
      exec("bench/run.js", 170, 100),
      exec("bench/run.js", 180, 200),
      { kind: "rollout", start: 120, end: 200 },
      exec("bench/run.js", 250, 999), // after the upgrade: the bench's own reads
    ];
    assert.deepEqual(upgradeSshOf(trace), {
      "bench/run.js": { count: 3, msTotal: 600, msMedian: 200 },
      "dynamic-provider/index.js": { count: 1, msTotal: 500, msMedian: 500 },
    });
  });

  it("says nothing when no rollout ended (a run that failed before its upgrade)", () => {
    assert.deepEqual(upgradeSshOf([exec("bench/run.js", 1, 1)]), {});
  });
});
