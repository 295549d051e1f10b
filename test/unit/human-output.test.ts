// The CLI's human output of waits: said once with its deadline, updated while it lasts, and
// how long it took; --json is not involved (the renderer is only used without it).
import * as assert from "node:assert/strict";
import { humanRenderer, printInspection } from "../../orchestrator/cli/render";
import type { Inspection } from "../../orchestrator/inspect";
import type { RolloutEvent } from "../../orchestrator/events";
import type { WaitKey } from "../../orchestrator/core/model";

function run(events: [number, RolloutEvent][], tty: boolean): string[] {
  let t = 0;
  let text = "";
  const render = humanRenderer({
    write: (s) => void (text += s),
    tty,
    deadlineOf: (key) => (key.startsWith("addons") ? 300 : 60),
    now: () => t,
  });
  for (const [at, e] of events) {
    t = at;
    render(e);
  }
  return text.split("\n").filter(Boolean);
}

const observed = (pass: number): RolloutEvent => ({ type: "observed", pass, nodes: [], ms: 5 });
const waitFor = (pass: number, reason: string, key: WaitKey = "addons"): RolloutEvent => ({
  type: "decision",
  pass,
  operation: { kind: "wait", key, reason },
});
const tick: RolloutEvent = { type: "phase", phase: "wait", operation: "wait", ms: 500, ok: true };
const prune: RolloutEvent = {
  type: "decision",
  pass: 99,
  operation: { kind: "prune", node: "cp-1", reason: "cp-1 has no member" },
};

/** 70 s of waiting on the kube-proxy DaemonSet, one pass every 0.5 s, then a prune. */
function longWait(): [number, RolloutEvent][] {
  const ev: [number, RolloutEvent][] = [[0, observed(1)]];
  let pass = 1;
  for (let ms = 0; ms <= 70_000; ms += 500) {
    ev.push([ms, waitFor(pass, `kube-proxy DaemonSet rolling out (${Math.floor(ms / 10_000)}/3 updated)`)]);
    ev.push([ms + 1, tick]);
    ev.push([ms + 499, observed(++pass)]);
  }
  ev.push([70_600, prune]);
  return ev;
}

describe("human output of waits", () => {
  it("says once what is awaited and its deadline, then every 30 s, then how long it took (not a terminal)", () => {
    const lines = run(longWait(), false).map((l) => l.slice(10));
    assert.deepEqual(lines, [
      "pass 1: (no nodes)",
      "waiting (at most 300s) for: kube-proxy DaemonSet rolling out (0/3 updated)",
      "  … still waiting 30s of at most 300s: kube-proxy DaemonSet rolling out (3/3 updated)",
      "  … still waiting 60s of at most 300s: kube-proxy DaemonSet rolling out (6/3 updated)",
      "  ✓ waited 70.6s: kube-proxy DaemonSet rolling out (7/3 updated)",
      "pass 142: (no nodes)",
      "→ prune: cp-1 has no member",
    ]);
    assert.ok(!lines.some((l) => l.includes("wait (wait)")), "no line per poll interval");
  });

  it("updates one line in place on a terminal", () => {
    const lines = run(longWait(), true);
    // Everything of the wait is one terminal line: rewritten with \r, ended by the result.
    const waitLine = lines.find((l) => l.includes("waiting"))!;
    // 141 wait decisions: the first writes the line, the other 140 and the end rewrite it.
    assert.equal(waitLine.split("\r\x1b[2K").length, 142, "each pass rewrites the line");
    assert.match(waitLine, /… waiting 0s of at most 300s: kube-proxy/);
    assert.match(waitLine.split("\r\x1b[2K").at(-1)!, /✓ waited 70\.6s: /);
    assert.equal(lines.filter((l) => l.includes("waiting")).length, 1);
  });

  it("a wait on another condition starts a new line; the pass between them is shown", () => {
    const lines = run(
      [
        [0, waitFor(1, "no agreed leader", "leader")],
        [500, observed(2)],
        [600, waitFor(2, "cp-4 catching up", "join:cp-4")],
        [700, prune],
      ],
      false,
    ).map((l) => l.slice(10));
    assert.deepEqual(lines, [
      "waiting (at most 60s) for: no agreed leader",
      "  ✓ waited 0.6s: no agreed leader",
      "pass 2: (no nodes)",
      "waiting (at most 60s) for: cp-4 catching up",
      "  ✓ waited 0.1s: cp-4 catching up",
      "→ prune: cp-1 has no member",
    ]);
  });

  it("ends a wait before the summary", () => {
    const lines = run(
      [
        [0, waitFor(1, "learner catching up", "join:cp-4")],
        [
          2000,
          {
            type: "summary",
            result: "cancelled",
            reason: "cancelled by the caller",
            stack: "lab",
            wallMs: 2000,
            operations: 0,
            phases: {
              observe: 0,
              provision: 0,
              etcd: 0,
              kube: 0,
              endpoint: 0,
              wait: 2000,
              snapshot: 0,
              hook: 0,
              molt: 0,
            },
            nodes: [],
            replaced: [],
          },
        ],
      ],
      false,
    ).map((l) => l.slice(10));
    assert.equal(lines[1], "  ✓ waited 2.0s: learner catching up");
    assert.equal(lines[2], "CANCELLED: cancelled by the caller");
  });
});

describe("human output of hooks and engine steps", () => {
  const events: [number, RolloutEvent][] = [
    [0, { type: "resource", op: "create", resource: "lab-cp-4-machine", kind: "molt:lab:Machine", status: "started" }],
    [1, { type: "resource", op: "create", resource: "lab-cp-4-machine", kind: "molt:lab:Machine", status: "done" }],
    [2, { type: "hook-output", hook: "postJoin", node: "lab-cp-4", line: "etcd endpoint healthy" }],
    [
      1500,
      {
        type: "hook",
        hook: "postJoin",
        node: "lab-cp-4",
        source: "command",
        ok: false,
        ms: 1498,
        output: "",
        error: "exited 3",
      },
    ],
  ];

  it("prints a callback's rejection (its output) before its result", () => {
    const failed: RolloutEvent = {
      type: "hook",
      hook: "preRetire",
      node: "lab-cp-1",
      source: "callback",
      ok: false,
      ms: 20,
      output: "the node still serves traffic",
      error: "threw an error",
    };
    assert.deepEqual(
      run([[0, failed]], false).map((l) => l.slice(10)),
      [
        "  | preRetire lab-cp-1: the node still serves traffic",
        "  ✗ preRetire hook (callback) for lab-cp-1 0.0s: threw an error",
      ],
    );
  });

  it("prints hook output as it comes and the hook's result; engine step starts in a log", () => {
    assert.deepEqual(
      run(events, false).map((l) => l.slice(10)),
      [
        "  · create lab-cp-4-machine",
        "  | postJoin lab-cp-4: etcd endpoint healthy",
        "  ✗ postJoin hook (command) for lab-cp-4 1.5s: exited 3",
      ],
    );
  });
});

describe("human output of a rollout's start", () => {
  const start = (extra: Partial<Extract<RolloutEvent, { type: "start" }>> = {}): RolloutEvent => ({
    type: "start",
    stack: "prod",
    command: "rollout",
    provider: "lab",
    replicas: 3,
    image: "lab-v2",
    time: "2026-12-01T00:30:00.000Z",
    ...extra,
  });

  it("names the maintenance window the run started in and when it closes", () => {
    const lines = run(
      [
        [
          0,
          start({
            window: {
              window: "mon,tue 22:00-04:00 Europe/Berlin",
              closesAt: "2026-12-01T04:00:00+01:00",
              closesInSeconds: 2 * 3600 + 30 * 60,
            },
          }),
        ],
      ],
      false,
    ).map((l) => l.slice(10));
    assert.deepEqual(lines, [
      "rollout of stack prod: 3 × lab-v2 on lab",
      "maintenance window mon,tue 22:00-04:00 Europe/Berlin: open, closes 2026-12-01 04:00:00+01:00 (in 2h 30m); " +
        "a replacement under way then is finished, then the run pauses (exit 5)",
    ]);
  });

  it("says nothing of a window when the stack has none", () => {
    assert.deepEqual(
      run([[0, start()]], false).map((l) => l.slice(10)),
      ["rollout of stack prod: 3 × lab-v2 on lab"],
    );
  });
});

describe("status table", () => {
  const inspection = (names: string[], kube: boolean): Inspection => ({
    stack: "prod",
    exists: true,
    intent: { provider: "lab", replicas: 3, image: "lab-v2", maxSurge: 1 },
    nodes: names.map((name, i) => ({
      name,
      image: i === 0 ? "adopted" : "lab-v2",
      generation: i,
      outdated: i === 0,
      member: { id: String(1000 + i), learner: false, leader: i === 1, healthy: true },
      ...(kube ? { kube: { nodeReady: true, cordoned: i === 0, apiserverVersion: "1.37.2", healthy: true } } : {}),
    })),
    members: [],
    alarms: [],
    conditions: [],
    next: { kind: "done", reason: "all nodes up to date" },
    replacements: [],
    progress: { upToDate: 2, replicas: 3, outdated: [names[0]] },
  });
  const printed = (i: Inspection): string[] => {
    const write = process.stdout.write.bind(process.stdout);
    let out = "";
    process.stdout.write = ((s: string) => ((out += s), true)) as typeof process.stdout.write;
    try {
      printInspection(i, "status");
    } finally {
      process.stdout.write = write;
    }
    return out.split("\n");
  };

  for (const kube of [false, true])
    it(`keeps the columns apart for names longer than the old fixed width (${kube ? "Kubernetes" : "etcd"})`, () => {
      const names = ["cp1.prod.example.internal", "prod-cp-4", "a-rather-long-node-name.prod.example.internal"];
      const lines = printed(inspection(names, kube));
      const at = lines.findIndex((l) => l.startsWith("NODE"));
      const header = lines[at];
      const rows = lines.slice(at + 1, at + 1 + names.length);
      // Every cell starts where its header does, at least two spaces after the cell before it.
      const starts = [...header.matchAll(/\S+/g)].map((m) => m.index);
      for (const [k, row] of rows.entries()) {
        const cells = row.split(/ {2,}/);
        assert.equal(cells[0], names[k], row);
        assert.equal(cells[1], k === 0 ? "adopted" : "lab-v2", row);
        assert.equal(cells.length, starts.length, row);
        for (const [c, cell] of cells.entries()) assert.equal(row.indexOf(cell, c ? starts[c] : 0), starts[c], row);
      }
    });
});
