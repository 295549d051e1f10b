// The rollout loop with fake edges (test/support/fake-edges.ts): whole runs in milliseconds,
// next to the same runs on the lab (test/e2e/*). What is asserted here is the loop's own
// part: the order of changes, the results, and that a crashed run resumes.
import { acquireClusterLock, clusterLockKeys } from "../../orchestrator/lease/cluster";
import { StateChangedByAnotherRunError } from "../../orchestrator/stack/state-changed";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { RolloutEvent } from "../../orchestrator/events";
import { claimLab, labOwner, readLabClaim, releaseLab } from "../../infra/lab/owner";
import { rollout, type RolloutOptions, type Summary } from "../../orchestrator/rollout";
import { inspect } from "../../orchestrator/inspect";
import { FAKE_MACHINE_TYPE, fakeEdges, FakeWorld } from "../support/fake-edges";
import { fakeProject, tickingClock, type FakeProject } from "../support/fake-project";
import type { MachineInventory } from "../../orchestrator/core/edges";
import { terminateEach } from "../../orchestrator/core/leaks";
import { acquireLock, ConcurrentRolloutError } from "../../orchestrator/lease/bucket";
import { pollUntil } from "../../lib/poll";
import { humanRenderer } from "../../orchestrator/cli/render";
import { WebhookNotifier } from "../../orchestrator/report/notify";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ownerMarkerJson, parseOwnerMarker } from "../../orchestrator/core/ownership";

/** A 3-node cluster whose nodes KubeOne made (`molt adopt`'s entries). */
function adoptedCluster(): FakeWorld {
  const w = FakeWorld.cluster(3, "adopted");
  for (const n of w.list) {
    const a = w.machines.get(n.name)!.address;
    n.adopted = {
      address: a,
      ssh: { host: a, port: 22, user: "root" },
      hostKey: "ssh-ed25519 AAAA",
      etcdVersion: "3.6.16",
      source: "kubeone",
    };
  }
  return w;
}

describe("the rollout loop (fake edges)", function () {
  let project: FakeProject;
  let dir: string;
  let env: Record<string, string>;

  before(() => {
    project = fakeProject("molt-loop-", { "lab-v1": {}, "lab-v2": {} });
    ({ dir } = project);
    env = project.envs.backend;
  });
  after(() => project.close());

  function stack(
    image: string,
    o: {
      replicas?: number;
      joinSeconds?: number;
      onFailure?: string;
      maxSurge?: number;
      vip?: boolean;
      lockSeconds?: number;
      lockIn?: "backend" | "cluster";
      /** More molt:rollout keys (soakSeconds, window, ...) and molt:hooks. */
      rollout?: Record<string, unknown>;
      hooks?: Record<string, unknown>;
      notify?: Record<string, unknown>;
    } = {},
  ): void {
    writeFileSync(
      join(dir, "stacks", "Pulumi.lab.yaml"),
      stringify({
        config: {
          "molt:provider": "lab",
          "molt:replicas": o.replicas ?? 3,
          "molt:image": image,
          "molt:rollout": {
            maxSurge: o.maxSurge ?? 1,
            ...(o.onFailure ? { onFailure: o.onFailure } : {}),
            ...o.rollout,
          },
          ...(o.hooks ? { "molt:hooks": o.hooks } : {}),
          ...(o.notify ? { "molt:notify": o.notify } : {}),
          "molt:timeouts": {
            joinSeconds: o.joinSeconds ?? 300,
            settleSeconds: 1,
            ...(o.lockSeconds ? { lockSeconds: o.lockSeconds } : {}),
          },
          "molt:lab": { name: "loop", root: join(dir, "lab") },
          ...(o.vip ? { "molt:apiEndpoint": { mode: "vip" } } : {}),
          ...(o.lockIn ? { "molt:lock": { in: o.lockIn } } : {}),
        },
      }),
    );
  }

  async function run(
    w: FakeWorld,
    o: Partial<RolloutOptions> = {},
  ): Promise<{ summary: Summary; events: RolloutEvent[] }> {
    const events: RolloutEvent[] = [];
    const summary = await rollout({
      stack: "lab",
      workDir: dir,
      env,
      edges: fakeEdges(w),
      pollMs: 1,
      // Deadlines on a clock that runs a second per reading: a 10 s join deadline passes in 10 polls.
      now: tickingClock(),
      onEvent: (e) => events.push(e),
      ...o,
    });
    return { summary, events };
  }

  const images = (w: FakeWorld) => w.list.map((n) => `${n.name}:${n.image}`);
  /** An ownership marker naming `stack` (in this suite's backend unless told). */
  const markerOf = (stack: string, backend = env.PULUMI_BACKEND_URL, by: "adopt" | "rollout" = "adopt") =>
    ownerMarkerJson({ stack, backend, claimedAt: "2026-01-02T03:04:05.000Z", by });

  it(
    "rolls 3 nodes to a new image add-first: surge, move leadership away, remove the member, prune; one node at a " +
      "time",
    async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary, events } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"]);
      assert.deepEqual(
        w.log.filter((l) => l.startsWith("up")),
        [
          "up surge lab-cp-4",
          "up prune lab-cp-1",
          "up surge lab-cp-5",
          "up prune lab-cp-2",
          "up surge lab-cp-6",
          "up prune lab-cp-3",
        ],
      );
      // The leader (lab-cp-1's member) handed leadership to the new node before its member went.
      const moved = w.log.findIndex((l) => l.startsWith("etcd moveLeader lab-cp-1"));
      const removed = w.log.findIndex((l) => l.startsWith("etcd memberRemove 1 "));
      assert.ok(moved >= 0 && moved < removed, w.log.join("\n"));
      // Never more than replicas + 1 nodes, never fewer than replicas members.
      let nodes = 3;
      let members = 3;
      for (const l of w.log) {
        if (l.startsWith("up surge")) {
          nodes++;
          members++;
        }
        if (l.startsWith("up prune")) nodes--;
        if (l.startsWith("etcd memberRemove")) members--;
        assert.ok(nodes <= 4 && members >= 3, `${l}: ${nodes} nodes, ${members} members`);
      }
      // An etcd snapshot before the first membership change, on the summary.
      assert.ok(w.log.indexOf("etcd snapshot lab-cp-1") < moved);
      assert.ok(summary.snapshotPath?.includes("lab-"));
      // The cluster had no ownership marker: claimed first, before any other change.
      assert.match(w.log[0], /^etcd writeOwner \{"stack":"lab",/);
      assert.equal(summary.operations, 10); // 3 surges, 1 move-leader, 3 member removals, 3 prunes (the claim: none)
      assert.equal(events.filter((e) => e.type === "decision" && e.operation.kind === "surge").length, 3);
      // A second run has nothing to do.
      const again = await run(w);
      assert.equal(again.summary.result, "noop");
    },
  );

  it(
    "replaces adopted nodes add-first, resets and releases them, and leaves their machines to their " + "owner",
    async () => {
      stack("lab-v2");
      const w = adoptedCluster();
      const { summary } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"]);
      const ups = w.log.filter((l) => l.startsWith("up"));
      assert.deepEqual(ups, [
        "up surge lab-cp-4",
        "up retire-adopted lab-cp-1",
        "up surge lab-cp-5",
        "up retire-adopted lab-cp-2",
        "up surge lab-cp-6",
        "up retire-adopted lab-cp-3",
      ]);
      for (const n of ["lab-cp-1", "lab-cp-2", "lab-cp-3"]) {
        // Member removed, then reset over SSH, released, then its entry dropped: in that order.
        const removed = w.log.findIndex((l) => l.startsWith("etcd memberRemove"));
        const reset = w.log.findIndex((l) => l.startsWith(`run ${n}: sh -c`) && l.includes("kubeadm reset"));
        const released = w.log.indexOf(`release ${n}`);
        const dropped = w.log.indexOf(`up retire-adopted ${n}`);
        assert.ok(removed >= 0 && removed < reset && reset < released && released < dropped, w.log.join("\n"));
        assert.ok(w.leftForOwner.get(n)?.up, `${n}'s machine still runs, for its owner`);
      }
      assert.deepEqual(
        summary.leftForOwner?.map((m) => m.node),
        ["lab-cp-1", "lab-cp-2", "lab-cp-3"],
        "the summary lists them as yours to delete",
      );
      assert.equal((await run(w)).summary.result, "noop");
    },
  );

  it("retires a dead adopted node without SSH and tells its owner it still holds the cluster's keys", async () => {
    stack("lab-v2");
    const w = adoptedCluster();
    w.machines.get("lab-cp-2")!.up = false;
    const { summary } = await run(w, { replaceDead: ["lab-cp-2"] });
    assert.equal(summary.result, "succeeded", summary.reason);
    assert.ok(!w.log.some((l) => l.startsWith("run lab-cp-2:")), "no command was sent to the dead machine");
    const left = summary.leftForOwner?.find((m) => m.node === "lab-cp-2");
    assert.ok(left, "the dead machine is listed for its owner");
    assert.ok(
      left.done.some((d) => /not reset: unreachable over SSH.*\/etc\/kubernetes\/pki/.test(d)),
      left.done.join("; "),
    );
    for (const n of ["lab-cp-1", "lab-cp-3"]) {
      const reset = w.log.find((l) => l.startsWith(`run ${n}: sh -c`));
      assert.match(reset ?? "", /rm -rf -- \S*\/etc\/kubernetes\/pki/, `${n}'s CA keys are wiped`);
    }
  });

  it("rolls a new node back when its member never starts, leaving the old nodes untouched", async () => {
    stack("lab-v2", { joinSeconds: 10 });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.faults.joinNeverStarts = true;
    // The run's clock, read without advancing it: when the waits began and when the rollback was decided.
    let t = Date.now();
    const at: { kind: string; t: number }[] = [];
    const { summary } = await run(w, {
      now: () => (t += 1000),
      onEvent: (e) => void (e.type === "decision" && at.push({ kind: e.operation.kind, t })),
    });
    assert.equal(summary.result, "rolled-back", summary.reason);
    assert.match(summary.reason, /join deadline/);
    const firstWait = at.find((d) => d.kind === "wait")!;
    const rollback = at.find((d) => d.t > firstWait.t && d.kind !== "wait")!;
    assert.ok(rollback.t - firstWait.t >= 10_000, `waited out the 10 s join deadline (${rollback.t - firstWait.t} ms)`);
    assert.deepEqual(images(w), ["lab-cp-1:lab-v1", "lab-cp-2:lab-v1", "lab-cp-3:lab-v1"]);
    assert.equal(w.members.length, 3);
    assert.ok(w.members.every((m) => !m.isLearner));
    assert.ok(w.log.some((l) => l.startsWith("up rollback lab-cp-4")));
    assert.equal(w.machines.size, 3);
  });

  it("watches a new node's join between full passes and acts once its member has started", async () => {
    stack("lab-v2");
    const w = FakeWorld.cluster(3, "lab-v1");
    w.faults.joinStartsAfterReads = 6;
    const seen: string[] = [];
    const { summary } = await run(w, {
      now: Date.now,
      onEvent: (e) => {
        if (e.type === "observed") seen.push("observed");
        if (e.type === "decision")
          seen.push(e.operation.kind === "wait" ? `wait ${e.operation.key}` : e.operation.kind);
      },
    });
    assert.equal(summary.result, "succeeded", summary.reason);
    const i = seen.indexOf("wait join:lab-cp-4");
    assert.ok(i > 0, `waited for lab-cp-4's join: ${seen.join(", ")}`);
    // One wait decided, then no full pass until the member started (status read 6 times, 5 of them by the
    // watch), then a full pass whose decision is the retirement's first step.
    assert.deepEqual(seen.slice(i, i + 3), ["wait join:lab-cp-4", "observed", "move-leader"]);
    assert.ok(w.statusReads.get("lab-cp-4")! >= 6);
  });

  it("pauses instead with --on-failure pause, leaving the new node for inspection", async () => {
    stack("lab-v2", { joinSeconds: 10 });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.faults.joinNeverStarts = true;
    const { summary } = await run(w, { onFailure: "pause" });
    assert.equal(summary.result, "paused", summary.reason);
    assert.equal(w.list.length, 4);
  });

  it("destroys what a failed surge left in the state and stops as rolled back", async () => {
    stack("lab-v2");
    const w = FakeWorld.cluster(3, "lab-v1");
    w.faults.upFailsAfterCreate = true;
    const { summary } = await run(w);
    assert.equal(summary.result, "rolled-back", summary.reason);
    assert.match(summary.reason, /could not be created \(.*join script exited 1/);
    assert.ok(w.log.includes("up prune-orphans lab-cp-4"), w.log.join("\n"));
    assert.equal(w.machines.size, 3);
    // Its member joined before the `up` failed: the next run removes it as a stray first.
    assert.equal(w.members.length, 4);
    stack("lab-v2");
    const again = await run(w);
    assert.equal(again.summary.result, "succeeded", again.summary.reason);
    assert.equal(w.members.length, 3);
  });

  describe("machines a killed run left on the cloud (--terminate-leaked)", () => {
    /** A cloud listing the held machines, one leaked machine, and one whose address is a stray etcd member. */
    function cloud(w: FakeWorld) {
      const terminated: string[] = [];
      const inventory: MachineInventory = {
        where: "fake cloud",
        resourceType: FAKE_MACHINE_TYPE,
        list: async () =>
          [
            ...[...w.machines.values()].map((m) => ({
              id: `fake-${m.entry.name}`,
              address: m.address,
              state: "running",
            })),
            { id: "i-leak", node: "lab-cp-9", address: "10.0.0.99", state: "running" },
            { id: "i-stray", node: "lab-cp-8", address: "10.0.0.98", state: "running" },
          ].filter((m) => !terminated.includes(m.id)),
        terminate: async (ids) => void terminated.push(...ids),
      };
      // The surge got as far as the join: its member is in etcd, its machine not in the state.
      w.members.push({
        id: "98",
        name: "lab-cp-8",
        peerURLs: ["https://10.0.0.98:2380"],
        clientURLs: [],
        isLearner: false,
      });
      return { inventory, terminated };
    }
    const leaked = (events: RolloutEvent[]) =>
      events.flatMap((e) => (e.type === "leaked-machines" ? [e.machines.map((m) => `${m.id}:${m.action}`)] : []));

    it("without the flag: reported at the start, nothing terminated", async () => {
      stack("lab-v1");
      const w = FakeWorld.cluster(3, "lab-v1");
      const c = cloud(w);
      const { summary, events } = await run(w, { inventory: c.inventory });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(leaked(events), [["i-leak:kept", "i-stray:kept"]]);
      assert.deepEqual(c.terminated, []);
    });

    it("with the flag: terminated at the end, the stray member's machine after its member left", async () => {
      stack("lab-v1");
      const w = FakeWorld.cluster(3, "lab-v1");
      const c = cloud(w);
      const { summary, events } = await run(w, { inventory: c.inventory, terminateLeaked: true });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.ok(!w.members.some((m) => m.id === "98"), "the stray member was removed first");
      assert.deepEqual(leaked(events), [
        ["i-leak:kept", "i-stray:kept"],
        ["i-leak:terminated", "i-stray:terminated"],
      ]);
      assert.deepEqual(c.terminated.sort(), ["i-leak", "i-stray"]);
      const start = events.findIndex((e) => e.type === "leaked-machines");
      const removal = w.log.findIndex((l) => l.includes("memberRemove"));
      assert.ok(start >= 0 && removal >= 0, w.log.join("\n"));
    });

    it("with the flag, a run that does not converge terminates nothing and says so", async () => {
      stack("lab-v2", { joinSeconds: 10 });
      const w = FakeWorld.cluster(3, "lab-v1");
      w.faults.joinNeverStarts = true;
      const c = cloud(w);
      const { summary, events } = await run(w, { inventory: c.inventory, terminateLeaked: true, onFailure: "pause" });
      assert.equal(summary.result, "paused", summary.reason);
      assert.deepEqual(c.terminated, []);
      assert.ok(
        events.some(
          (e) => e.type === "warning" && /did not converge, so no leaked machine was terminated/.test(e.message),
        ),
      );
    });

    it("one of three that cannot be terminated: the report names which were terminated and which not", async () => {
      stack("lab-v1");
      const w = FakeWorld.cluster(3, "lab-v1");
      const c = cloud(w);
      const inventory: MachineInventory = {
        ...c.inventory,
        list: async () => [
          ...(await c.inventory.list()),
          ...(c.terminated.includes("i-leak2")
            ? []
            : [{ id: "i-leak2", node: "lab-cp-7", address: "10.0.0.97", state: "running" }]),
        ],
        terminate: (ids) =>
          terminateEach("fake cloud", ids, async (id) => {
            if (id === "i-leak2") throw new Error("OperationNotPermitted: termination protection\nmore detail");
            c.terminated.push(id);
          }),
      };
      const { summary, events } = await run(w, { inventory, terminateLeaked: true });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(c.terminated.sort(), ["i-leak", "i-stray"], "the others were terminated all the same");
      assert.deepEqual(leaked(events), [
        ["i-leak:kept", "i-stray:kept", "i-leak2:kept"],
        ["i-leak:terminated", "i-stray:terminated", "i-leak2:terminate-failed"],
      ]);
      const failed = events.flatMap((e) => (e.type === "leaked-machines" ? e.machines : [])).at(-1);
      assert.match(failed?.reason ?? "", /OperationNotPermitted: termination protection$/);
      const warning = events.find((e) => e.type === "warning" && /NOT terminated/.test(e.message));
      assert.ok(warning && warning.type === "warning", "a warning says what was not terminated");
      assert.match(
        warning.message,
        /1 NOT terminated \(i-leak2: OperationNotPermitted.*\); terminated: i-leak, i-stray/,
      );
    });

    it("ids compare in the inventory's form (Azure: ARM ids in any case): a held machine is never a leak", async () => {
      stack("lab-v1");
      const w = FakeWorld.cluster(3, "lab-v1");
      const c = cloud(w);
      const upper: MachineInventory = {
        ...c.inventory,
        list: async () => (await c.inventory.list()).map((m) => ({ ...m, id: m.id.toUpperCase() })),
        idKey: (id) => id.toLowerCase(),
      };
      const { summary, events } = await run(w, { inventory: upper, terminateLeaked: true });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(leaked(events), [
        ["I-LEAK:kept", "I-STRAY:kept"],
        ["I-LEAK:terminated", "I-STRAY:terminated"],
      ]);
      assert.deepEqual(c.terminated.sort(), ["I-LEAK", "I-STRAY"]);
    });

    it("a cloud that cannot be listed is a warning, not a failed run", async () => {
      stack("lab-v1");
      const w = FakeWorld.cluster(3, "lab-v1");
      const inventory: MachineInventory = {
        where: "fake cloud",
        resourceType: FAKE_MACHINE_TYPE,
        list: () => Promise.reject(new Error("UnauthorizedOperation: ec2:DescribeInstances")),
        terminate: () => Promise.reject(new Error("not called")),
      };
      const { summary, events } = await run(w, { inventory });
      assert.equal(summary.result, "noop", summary.reason);
      assert.ok(events.some((e) => e.type === "warning" && /DescribeInstances/.test(e.message)));
    });
  });

  it("with molt:lock.in cluster: holds the lease in etcd before the first change, releases it at the end", async () => {
    stack("lab-v2", { lockIn: "cluster" });
    const w = FakeWorld.cluster(3, "lab-v1");
    const { summary, events } = await run(w);
    assert.equal(summary.result, "succeeded", summary.reason);
    const scopes = events.filter((e) => e.type === "lock").map((e) => (e as { scope: string }).scope);
    assert.deepEqual(scopes, ["cluster"]);
    const firstUp = events.findIndex((e) => e.type === "decision" && e.operation.kind === "surge");
    assert.ok(events.findIndex((e) => e.type === "lock") < firstUp, "the lease before the first change");
    assert.equal(w.kv.peek(clusterLockKeys("lab").key), undefined, "released");
  });

  it("with molt:lock.in cluster: refused, changing nothing, while another runner holds the lease in etcd", async () => {
    stack("lab-v2", { lockIn: "cluster" });
    const w = FakeWorld.cluster(3, "lab-v1");
    const other = await acquireClusterLock(w.kv, "lab", "rollout", {
      ttlSeconds: 30,
      identity: { host: "runner-b", machine: "b" },
    });
    await assert.rejects(run(w), ConcurrentRolloutError);
    assert.deepEqual(
      w.log.filter((l) => l.startsWith("up ")),
      [],
    );
    await other.release();
  });

  it("stops at once, rolling nothing back, when the state guard refuses a surge (the stack changed)", async () => {
    stack("lab-v2");
    const w = FakeWorld.cluster(3, "lab-v1");
    w.faults.stateChangedOnNextUp = true;
    await assert.rejects(run(w), StateChangedByAnotherRunError);
    assert.deepEqual(
      w.log.filter((l) => l.startsWith("up ")),
      ["up surge lab-cp-4 refused by the state guard"],
      "no rollback, no other up",
    );
    assert.equal(w.machines.size, 3);
  });

  describe("molt:rollout.pruneWithNextSurge", () => {
    const on = { rollout: { pruneWithNextSurge: true } };
    /** A 3-node roll with the option on, `fault` applied just before its first prune-and-surge. */
    const rollWithFirstMergeFaulted = (fault: (w: FakeWorld) => void) => {
      stack("lab-v2", on);
      const w = FakeWorld.cluster(3, "lab-v1");
      let merged = 0;
      const result = run(w, {
        beforeOperation: async (op) => {
          if (op.kind === "prune-and-surge" && merged++ === 0) fault(w);
        },
      });
      return { w, result };
    };

    it("destroys each retired node and creates the next in one `up`: 4 engine runs for 3 nodes, not 6", async () => {
      stack("lab-v2", on);
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary, events } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"]);
      assert.deepEqual(
        w.log.filter((l) => l.startsWith("up")),
        [
          "up surge lab-cp-4",
          "up prune-and-surge lab-cp-1+lab-cp-5",
          "up prune-and-surge lab-cp-2+lab-cp-6",
          "up prune lab-cp-3",
        ],
      );
      // Add first still: each new node joined before the next old member (lab-cp-2's is 2, lab-cp-3's 3) went.
      for (const [id, added] of [
        ["2", "lab-cp-5"],
        ["3", "lab-cp-6"],
      ]) {
        const up = w.log.findIndex((l) => l.endsWith(`+${added}`));
        const removed = w.log.findIndex((l) => l.startsWith(`etcd memberRemove ${id} `));
        assert.ok(up >= 0 && removed > up, w.log.join("\n"));
      }
      assert.deepEqual(summary.replaced, ["lab-cp-1", "lab-cp-2", "lab-cp-3"]);
      const merged = events.filter((e) => e.type === "decision" && e.operation.kind === "prune-and-surge");
      assert.equal(merged.length, 2);
      assert.equal((await run(w)).summary.result, "noop");
    });

    it("a failed create: the new node is rolled back, the retired one destroyed, old nodes untouched", async () => {
      const { w, result } = rollWithFirstMergeFaulted((w) => (w.faults.upFailsAfterCreate = true));
      const { summary } = await result;
      assert.equal(summary.result, "rolled-back", summary.reason);
      assert.match(summary.reason, /lab-cp-5 could not be created \(.*join script exited 1/);
      const ups = w.log.filter((l) => l.startsWith("up"));
      assert.deepEqual(ups, [
        "up surge lab-cp-4",
        "up prune-and-surge lab-cp-1+lab-cp-5",
        "up prune-orphans lab-cp-5",
        "up prune lab-cp-1",
      ]);
      assert.deepEqual(images(w), ["lab-cp-2:lab-v1", "lab-cp-3:lab-v1", "lab-cp-4:lab-v2"]);
      assert.deepEqual([...w.machines.keys()].sort(), ["lab-cp-2", "lab-cp-3", "lab-cp-4"]);
      // The next run removes the failed node's stray member and carries on.
      const again = await run(w);
      assert.equal(again.summary.result, "succeeded", again.summary.reason);
      assert.equal(w.members.length, 3);
    });

    it("a failed delete: the joined node stays, what is left of the retired one goes next", async () => {
      const { w, result } = rollWithFirstMergeFaulted((w) => (w.faults.deleteFailsAfterCreate = true));
      const { summary, events } = await result;
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"]);
      const ups = w.log.filter((l) => l.startsWith("up"));
      assert.deepEqual(ups.slice(0, 3), [
        "up surge lab-cp-4",
        "up prune-and-surge lab-cp-1+lab-cp-5",
        "up prune-orphans lab-cp-1",
      ]);
      assert.ok(
        events.some(
          (e) =>
            e.type === "warning" && /lab-cp-5 joined, but the same update failed to destroy lab-cp-1/.test(e.message),
        ),
      );
      assert.ok(!w.log.some((l) => l.startsWith("up rollback")), "the joined node was not rolled back");
      assert.equal(w.machines.size, 3);
    });

    it("a failed join after the list was written (the lab's order): rolled back, not taken as joined", async () => {
      const { w, result } = rollWithFirstMergeFaulted((w) => (w.faults.joinFailsAfterListWritten = true));
      const { summary, events } = await result;
      assert.equal(summary.result, "rolled-back", summary.reason);
      assert.ok(!events.some((e) => e.type === "warning" && /joined, but/.test(e.message)), "not reported as joined");
      const ups = w.log.filter((l) => l.startsWith("up"));
      assert.deepEqual(ups, [
        "up surge lab-cp-4",
        "up prune-and-surge lab-cp-1+lab-cp-5",
        "up prune-orphans lab-cp-1",
        "up rollback lab-cp-5",
      ]);
      assert.deepEqual(images(w), ["lab-cp-2:lab-v1", "lab-cp-3:lab-v1", "lab-cp-4:lab-v2"]);
      assert.deepEqual([...w.machines.keys()].sort(), ["lab-cp-2", "lab-cp-3", "lab-cp-4"]);
      assert.equal(w.members.length, 3, "the new node's learner was removed");
      assert.equal((await run(w)).summary.result, "succeeded");
    });

    it("a change refused before the engine ran stops the run; it is not taken for a failed surge", async () => {
      // Another writer changed the stored list between the decision and its `up`.
      const { w, result } = rollWithFirstMergeFaulted((w) => (w.list = w.list.slice(1)));
      await assert.rejects(result, /stored node list changed under this run/);
      assert.ok(!w.log.some((l) => l.startsWith("up prune-and-surge")), w.log.join("\n"));
    });

    it("resumes a run that died after any of its changes", async () => {
      stack("lab-v2", on);
      for (let crash = 1; crash <= 4; crash++) {
        const w = FakeWorld.cluster(3, "lab-v1");
        w.faults.crashAfterApply = crash;
        await assert.rejects(run(w), /simulated crash/, `crash at change ${crash}: ${w.log.join(", ")}`);
        const { summary } = await run(w);
        assert.equal(summary.result, crash === 4 ? "noop" : "succeeded", `crash at change ${crash}: ${summary.reason}`);
        assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"], `crash at ${crash}`);
        assert.equal(w.members.length, 3);
        assert.equal(w.machines.size, 3);
      }
    });
  });

  describe("ownership of the cluster (core/ownership.ts)", () => {
    const changes = (w: FakeWorld) => w.log.filter((l) => !l.startsWith("etcd snapshot"));

    it("another stack's marker stops the run before any change: refused, no membership call", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      // Another stack's new, healthy voter: a stray to this stack (the harm of two adoptions).
      w.members.push({
        id: "77",
        name: "other-cp-4",
        peerURLs: ["https://10.0.9.4:2380"],
        clientURLs: [],
        isLearner: false,
      });
      w.setOwner(markerOf("other", "s3://state/other"));
      const before = w.owner;
      const { summary } = await run(w);
      assert.equal(summary.result, "refused", summary.reason);
      assert.match(
        summary.reason,
        /^ClusterOwnedByAnotherStack: the cluster is owned by stack other \(backend s3:\/\/state\/other\)/,
      );
      assert.match(summary.reason, /molt disown --stack other/);
      assert.deepEqual(w.log, [], "no call changed anything: no member removed, no node made, no marker written");
      assert.equal(w.members.length, 4);
      assert.deepEqual(w.owner, before);
      assert.equal(summary.operations, 0);
    });

    it("a cluster without a marker is claimed first, naming this stack and its backend; kept after", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary, events } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      const decisions = events.flatMap((e) => (e.type === "decision" ? [e.operation.kind] : []));
      assert.equal(decisions[0], "claim-ownership");
      assert.equal(decisions.filter((k) => k === "claim-ownership").length, 1);
      const m = parseOwnerMarker(w.owner!.value);
      assert.ok(!("invalid" in m));
      assert.deepEqual(
        { stack: m.stack, backend: m.backend, by: m.by },
        {
          stack: "lab",
          backend: env.PULUMI_BACKEND_URL,
          by: "rollout",
        },
      );
      const revision = w.owner!.revision;
      const again = await run(w);
      assert.equal(again.summary.result, "noop", again.summary.reason);
      assert.equal(w.owner!.revision, revision, "its own marker is not written again");
    });

    it("a refusal after the claim is still a refusal (exit 2), not a failure after changes", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      w.machines.get("lab-cp-2")!.up = false;
      const { summary } = await run(w);
      assert.equal(summary.result, "refused", summary.reason);
      assert.match(summary.reason, /^EtcdMemberHealthy: etcd member of lab-cp-2 is not healthy/);
      assert.equal(summary.operations, 0);
      assert.deepEqual(
        w.log.map((l) => l.split(" ").slice(0, 2).join(" ")),
        ["etcd writeOwner"],
        "the marker was written, nothing else",
      );
    });

    it("a new cluster is claimed by the run that made it, right after its first node", async () => {
      stack("lab-v1", { replicas: 1 });
      const w = new FakeWorld();
      const { summary } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(
        changes(w).map((l) => l.split(" ").slice(0, 2).join(" ")),
        ["up create-first", "etcd writeOwner"],
      );
    });

    it("plan shows the claim of an unmarked cluster, and status whether this stack owns it", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const owned = async () =>
        (await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) })).conditions.find(
          (c) => c.type === "ClusterOwned",
        );
      let i = await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) });
      assert.equal(i.next.kind, "claim-ownership");
      assert.deepEqual(await owned(), {
        type: "ClusterOwned",
        status: "False",
        reason: "no ownership marker: the next rollout claims the cluster",
      });
      w.setOwner(markerOf("other", "s3://state/other"));
      i = await inspect({ stack: "lab", workDir: dir, env, edges: fakeEdges(w) });
      assert.equal(i.next.kind, "refuse");
      assert.match((await owned())!.reason, /^stack other \(backend s3:\/\/state\/other\), claimed by molt adopt/);
      w.setOwner(markerOf("lab"));
      assert.equal((await owned())?.status, "True");
      assert.deepEqual(w.log, [], "plan and status change nothing");
    });

    it("a claim that lands second is refused, changing no member (two runs racing)", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      w.faults.ownerClaimedFirst = markerOf("other", "s3://state/other", "rollout");
      const { summary } = await run(w);
      assert.equal(summary.result, "refused", summary.reason);
      assert.match(
        summary.reason,
        /ClusterOwnedByAnotherStack: stack lab .* could not claim the cluster: stack other \(backend s3:\/\/state\/other\) claimed it first/,
      );
      assert.deepEqual(
        changes(w).map((l) => l.split(" ").slice(0, 2).join(" ")),
        ["etcd writeOwner"],
      );
      assert.equal(JSON.parse(w.owner!.value).stack, "other");
    });

    it("--take-over naming the owner takes the cluster from it, then rolls", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(markerOf("gone", "s3://old-bucket"));
      const revision = w.owner!.revision;
      const { summary } = await run(w, { takeOver: "gone" });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.ok(w.log[0].startsWith("etcd writeOwner") && w.log[0].endsWith(`if revision ${revision}`), w.log[0]);
      assert.equal(JSON.parse(w.owner!.value).stack, "lab");
      assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"]);
      // The same command again: the cluster is this stack's already.
      assert.equal((await run(w, { takeOver: "gone" })).summary.result, "noop");
    });

    it("bad input: --take-over naming the wrong stack, or no owner, refuses and changes nothing", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner(markerOf("other"));
      let r = await run(w, { takeOver: "otter" });
      assert.equal(r.summary.result, "refused");
      assert.match(r.summary.reason, /--take-over otter does not name it/);
      w.owner = undefined;
      r = await run(w, { takeOver: "other" });
      assert.equal(r.summary.result, "refused");
      assert.match(r.summary.reason, /^ClusterNotOwned: --take-over other: the cluster has no ownership marker/);
      assert.deepEqual(w.log, []);
      assert.equal(w.owner, undefined);
    });

    it("a marker not JSON refuses, changing nothing; an unreadable one is waited on, then refuses", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      w.setOwner("owned-by-ops");
      let r = await run(w);
      assert.equal(r.summary.result, "refused");
      assert.match(r.summary.reason, /^ClusterOwnerMarkerInvalid: .*not valid JSON \("owned-by-ops"\)/);
      w.owner = undefined;
      w.faults.ownerReadFails = true;
      r = await run(w);
      assert.equal(r.summary.result, "refused");
      assert.match(r.summary.reason, /^ClusterOwnerUnknown: .*reading the ownership marker failed/);
      assert.ok(
        r.events.some((e) => e.type === "decision" && e.operation.kind === "wait"),
        "it waited first",
      );
      assert.deepEqual(w.log, []);
    });
  });

  it("refuses an alarmed cluster before changing anything", async () => {
    stack("lab-v2");
    const w = FakeWorld.cluster(3, "lab-v1");
    w.alarms = [{ memberId: w.members[1].id, alarm: "NOSPACE" }];
    const { summary } = await run(w);
    assert.equal(summary.result, "refused");
    assert.match(summary.reason, /EtcdClusterHealthy: etcd has active alarms: NOSPACE/);
    assert.deepEqual(w.log, []);
  });

  it("refuses a --replace-dead name that is not a node, before anything is looked at", async () => {
    stack("lab-v2");
    const w = FakeWorld.cluster(3, "lab-v1");
    await assert.rejects(run(w, { replaceDead: ["lab-cp-9"] }), /--replace-dead lab-cp-9: no such node/);
    assert.deepEqual(w.log, []);
  });

  it("resumes a run that died at every change boundary and converges to the same end", async () => {
    stack("lab-v2");
    for (let crash = 1; crash <= 6; crash++) {
      const w = FakeWorld.cluster(3, "lab-v1");
      w.faults.crashAfterApply = crash;
      await assert.rejects(run(w), /simulated crash/, `crash at change ${crash}: ${w.log.join(", ")}`);
      const { summary } = await run(w);
      // After the last change there is nothing left to do.
      assert.equal(summary.result, crash === 6 ? "noop" : "succeeded", `crash at change ${crash}: ${summary.reason}`);
      assert.deepEqual(
        images(w),
        ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"].map((s) => s),
        `crash at ${crash}`,
      );
      assert.equal(w.members.length, 3);
    }
  });

  it("stops at the next boundary when another runner took its lease over (after it expired)", async function () {
    this.timeout(20_000);
    stack("lab-v2", { lockSeconds: 10 });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.setOwner(markerOf("lab"));
    const events: RolloutEvent[] = [];
    let taken: string | undefined;
    const { summary } = await run(w, {
      onEvent: (e) => events.push(e),
      beforeOperation: async () => {
        if (taken) return;
        // As if this run had gone silent past its time to live: its lease ages, runner B takes it.
        const versions = join(dir, "backend", ".molt", "locks", "lab.json.versions");
        const old = new Date(Date.now() - 60_000);
        for (const v of readdirSync(versions).filter((n) => /^\d+$/.test(n))) utimesSync(join(versions, v), old, old);
        const b = await acquireLock(env.PULUMI_BACKEND_URL, "lab", "rollout", {
          ttlSeconds: 10,
          identity: { host: "runner-b", machine: "b" },
        });
        taken = b.holder.runId;
        await pollUntil(() => (events.some((e) => e.type === "lock-lost") ? true : undefined), {
          what: "the run to notice its lease is gone",
          deadlineMs: 10_000,
        });
        await b.release();
      },
    });
    assert.equal(summary.result, "failed");
    assert.match(summary.reason, new RegExp(`run ${taken} \\(pid \\d+ on runner-b\\) took it over`));
    assert.match(summary.reason, /stopped at a boundary between operations/);
    // The change already decided ran (its `up` would have been interrupted); nothing after it.
    assert.deepEqual(w.log, ["up surge lab-cp-4"]);
  });

  it("stops at a boundary when cancelled", async () => {
    stack("lab-v2");
    const w = FakeWorld.cluster(3, "lab-v1");
    const ac = new AbortController();
    const { summary } = await run(w, {
      signal: ac.signal,
      beforeOperation: async (op) => {
        if (op.kind === "prune") ac.abort();
      },
    });
    assert.equal(summary.result, "cancelled");
    assert.equal(w.list.length, 3); // the prune in flight finished; nothing after it started
  });

  it("replaces a dead member remove-first with --replace-dead", async () => {
    stack("lab-v1");
    const w = FakeWorld.cluster(3, "lab-v1");
    w.leaderId = w.members[0].id;
    w.machines.get("lab-cp-2")!.up = false;
    const { summary, events } = await run(w, { replaceDead: ["lab-cp-2"] });
    assert.equal(summary.result, "succeeded", summary.reason);
    const ups = w.log.filter((l) => /^(up|etcd memberRemove)/.test(l));
    assert.deepEqual(ups.slice(0, 3), ["etcd memberRemove 2 via lab-cp-1", "up prune lab-cp-2", "up surge lab-cp-4"]);
    assert.deepEqual(
      w.list.map((n) => n.name),
      ["lab-cp-1", "lab-cp-3", "lab-cp-4"],
    );
    // Its machine does not answer either: destroyed without its reset, as every pruned machine.
    const prune = events.find((e) => e.type === "decision" && e.operation.kind === "prune");
    assert.ok(prune?.type === "decision" && /does not answer over SSH.*no reset/.test(prune.operation.reason));
  });

  it("with an API endpoint VIP, the holder releases it before its leadership or member is touched", async () => {
    stack("lab-v2", { vip: true });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.vip = { holder: "lab-cp-1", stopped: new Set() };
    const { summary } = await run(w);
    assert.equal(summary.result, "succeeded", summary.reason);
    const release = w.log.indexOf("keepalived release lab-cp-1");
    assert.ok(release >= 0, w.log.join("\n"));
    const firstOnNode1 = w.log.findIndex((l) => /^etcd (moveLeader|memberRemove 1 )/.test(l));
    assert.ok(release < firstOnNode1, "released before leadership or member moved");
    // It went to the newest node (lab-cp-4, never retired); no other node had to release.
    assert.equal(w.vip.holder, "lab-cp-4");
    assert.equal(w.log.filter((l) => l.startsWith("keepalived")).length, 1);
  });

  it("stops, changing nothing more, when no other node takes the VIP; the holder's keepalived runs again", async () => {
    stack("lab-v2", { vip: true });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.vip = { holder: "lab-cp-1", stopped: new Set() };
    w.faults.vipNotTakenOver = true;
    const { summary } = await run(w);
    assert.equal(summary.result, "failed");
    assert.match(
      summary.reason,
      /hand-off of the API endpoint VIP .* from lab-cp-1 did not complete.*started again and nothing was removed/,
    );
    assert.deepEqual(
      w.log.filter((l) => l.startsWith("keepalived")),
      ["keepalived release lab-cp-1", "keepalived resume lab-cp-1"],
    );
    assert.equal(w.vip.holder, "lab-cp-1");
    assert.equal(w.members.length, 4, "no member was removed");
  });

  it("stops, nothing removed, when nothing answers through the moved VIP; keepalived runs again", async () => {
    stack("lab-v2", { vip: true });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.vip = { holder: "lab-cp-1", stopped: new Set() };
    w.faults.vipNotAnswering = true;
    const { summary } = await run(w);
    assert.equal(summary.result, "failed");
    assert.match(
      summary.reason,
      /from lab-cp-1 did not complete .*the endpoint has not answered through it yet.*started again/,
    );
    assert.deepEqual(
      w.log.filter((l) => l.startsWith("keepalived")),
      ["keepalived release lab-cp-1", "keepalived resume lab-cp-1"],
    );
    assert.equal(w.members.length, 4, "no member was removed");
  });

  it("says so when the holder's keepalived could not be started again after a release no node took", async () => {
    stack("lab-v2", { vip: true });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.vip = { holder: "lab-cp-1", stopped: new Set() };
    w.faults.vipNotTakenOver = true;
    w.faults.vipResumeFails = true;
    const { summary } = await run(w);
    assert.equal(summary.result, "failed");
    assert.match(
      summary.reason,
      /from lab-cp-1 did not complete.*starting keepalived on lab-cp-1 again FAILED \(.*timed out.*\): no node may hold the VIP now; start it there by hand/,
    );
    assert.doesNotMatch(summary.reason, /was started again/);
    assert.equal(w.vip.holder, undefined);
    assert.equal(w.members.length, 4, "no member was removed");
  });

  it("refuses before releasing while no new node is eligible for the VIP (its endpoint check fails)", async () => {
    stack("lab-v2", { vip: true });
    const w = FakeWorld.cluster(3, "lab-v1");
    w.vip = { holder: "lab-cp-1", stopped: new Set() };
    w.faults.vipNewNodesFault = true;
    const { summary } = await run(w);
    assert.equal(summary.result, "failed");
    assert.match(summary.reason, /APIEndpointAvailable: no up-to-date node could take the API endpoint VIP over/);
    assert.deepEqual(
      w.log.filter((l) => l.startsWith("keepalived")),
      [],
      "nothing was released",
    );
    assert.equal(w.vip.holder, "lab-cp-1");
  });

  describe("operator controls", () => {
    const decisions = (events: RolloutEvent[]) => events.flatMap((e) => (e.type === "decision" ? [e.operation] : []));
    const ups = (w: FakeWorld) => w.log.filter((l) => l.startsWith("up"));

    it("--max-replacements 1 pauses after one replacement; each next run does one more, then all is done", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const first = await run(w, { maxReplacements: 1 });
      assert.equal(first.summary.result, "paused", first.summary.reason);
      assert.match(first.summary.reason, /--max-replacements 1.*2 outdated node\(s\) left \(lab-cp-2, lab-cp-3\)/);
      assert.deepEqual(first.summary.replaced, ["lab-cp-1"]);
      assert.deepEqual(ups(w), ["up surge lab-cp-4", "up prune lab-cp-1"]);
      // Stopped at rest: replicas nodes, every member a voter.
      assert.equal(w.list.length, 3);
      assert.equal(w.members.length, 3);
      assert.ok(w.members.every((m) => !m.isLearner));
      const second = await run(w, { maxReplacements: 1 });
      assert.equal(second.summary.result, "paused");
      assert.deepEqual(second.summary.replaced, ["lab-cp-2"]);
      const last = await run(w);
      assert.equal(last.summary.result, "succeeded", last.summary.reason);
      assert.deepEqual(images(w), ["lab-cp-4:lab-v2", "lab-cp-5:lab-v2", "lab-cp-6:lab-v2"]);
    });

    it("refuses a --max-replacements below 1 before anything is looked at", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      await assert.rejects(run(w, { maxReplacements: 0 }), /--max-replacements: 0 is not a whole number of at least 1/);
      await assert.rejects(run(w, { maxReplacements: 1.5 }), /--max-replacements/);
      assert.deepEqual(w.log, []);
    });

    it("soaks each new node (soakSeconds) before the node it replaces is retired", async () => {
      stack("lab-v2", { rollout: { soakSeconds: 5 } });
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary, events } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      const ops = decisions(events);
      for (const [added, retired] of [
        ["lab-cp-4", "lab-cp-1"],
        ["lab-cp-5", "lab-cp-2"],
        ["lab-cp-6", "lab-cp-3"],
      ]) {
        const soaks = ops.filter((o) => o.kind === "wait" && o.key === `soak:${added}`).length;
        // The clock runs a second per reading: 5 s of soak are at least 5 passes.
        assert.ok(
          soaks >= 5,
          `${added} soaked (${soaks} passes): ${ops.map((o) => (o.kind === "wait" ? o.key : o.kind)).join(" ")}`,
        );
        const lastSoak = ops.map((o) => o.kind === "wait" && o.key === `soak:${added}`).lastIndexOf(true);
        const firstRetire = ops.findIndex((o) =>
          (o.kind === "remove-member" || o.kind === "move-leader") && o.kind === "remove-member"
            ? o.node === retired
            : o.kind === "move-leader" && o.from === retired,
        );
        assert.ok(lastSoak >= 0 && lastSoak < firstRetire, `${retired} retired only after ${added}'s soak`);
      }
    });

    it("rolls a new node back when it turns unhealthy during its soak, leaving the old nodes intact", async () => {
      stack("lab-v2", { rollout: { soakSeconds: 60 }, joinSeconds: 10 });
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary } = await run(w, {
        onEvent: (e) => {
          if (e.type === "decision" && e.operation.kind === "wait" && e.operation.key === "soak:lab-cp-4")
            w.machines.get("lab-cp-4")!.up = false;
        },
      });
      assert.equal(summary.result, "rolled-back", summary.reason);
      assert.ok(
        w.log.some((l) => l.startsWith("up rollback lab-cp-4")),
        w.log.join("\n"),
      );
      assert.deepEqual(images(w), ["lab-cp-1:lab-v1", "lab-cp-2:lab-v1", "lab-cp-3:lab-v1"]);
      assert.equal(w.members.length, 3);
    });

    it("runs library hooks in order around each replacement: postJoin, preRetire, postRetire", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const calls: string[] = [];
      const hook = (name: string) => async (c: { node: string; nodes: string[]; sshConfig?: string }) => {
        calls.push(`${name} ${c.node}`);
        w.log.push(`hook ${name} ${c.node}`);
        assert.ok(c.sshConfig && existsSync(c.sshConfig), "an ssh_config while the hook runs");
        hookFiles.push(c.sshConfig);
      };
      const hookFiles: string[] = [];
      const { summary, events } = await run(w, {
        hooks: { postJoin: hook("postJoin"), preRetire: hook("preRetire"), postRetire: hook("postRetire") },
      });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(calls.slice(0, 3), ["postJoin lab-cp-4", "preRetire lab-cp-1", "postRetire lab-cp-1"]);
      assert.equal(calls.length, 9);
      // postJoin before anything touches the old node; postRetire after its member left, before its machine.
      const i = (l: string) => w.log.findIndex((x) => x.startsWith(l));
      assert.ok(i("up surge lab-cp-4") < i("hook postJoin lab-cp-4"));
      assert.ok(i("hook preRetire lab-cp-1") < i("etcd moveLeader lab-cp-1"));
      assert.ok(i("etcd memberRemove 1 ") < i("hook postRetire lab-cp-1"));
      assert.ok(i("hook postRetire lab-cp-1") < i("up prune lab-cp-1"));
      assert.ok(
        hookFiles.every((f) => !existsSync(f)),
        "credential files are removed after each hook",
      );
      assert.equal(events.filter((e) => e.type === "hook" && e.ok).length, 9);
    });

    it("a molt:hooks command gets the node in its environment, not molt's passphrase; output in events", async () => {
      const out = join(dir, "hook-env.txt");
      stack("lab-v2", {
        hooks: {
          postJoin: {
            command:
              `echo "checking $MOLT_NODE"; ` +
              `printf '%s|%s|%s|%s|%s\\n' "$MOLT_HOOK" "$MOLT_NODE" "$MOLT_NODE_ADDRESS" "$MOLT_NODES" ` +
              `"\${PULUMI_CONFIG_PASSPHRASE:-none}" >> ${out}; ` +
              `test -f "$MOLT_SSH_CONFIG" && grep -q lab-cp-4 "$MOLT_SSH_CONFIG"`,
            timeoutSeconds: 10,
          },
        },
      });
      const w = FakeWorld.cluster(3, "lab-v1");
      process.env.PULUMI_CONFIG_PASSPHRASE = "do-not-leak";
      try {
        const { summary, events } = await run(w, { maxReplacements: 1 });
        assert.equal(summary.result, "paused", summary.reason);
        const lines = readFileSync(out, "utf8").trim().split("\n");
        assert.deepEqual(lines, ["postJoin|lab-cp-4|10.0.0.4|lab-cp-1 lab-cp-2 lab-cp-3 lab-cp-4|none"]);
        assert.ok(events.some((e) => e.type === "hook-output" && e.line === "checking lab-cp-4"));
        const done = events.find((e) => e.type === "hook");
        assert.ok(done?.type === "hook" && done.ok && done.output.includes("checking lab-cp-4"));
      } finally {
        delete process.env.PULUMI_CONFIG_PASSPHRASE;
      }
    });

    it("a failing postJoin hook rolls the new node back; the old nodes are intact", async () => {
      stack("lab-v2", { hooks: { postJoin: { command: "echo 'apiserver not ready' >&2; exit 3" } } });
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary, events } = await run(w);
      assert.equal(summary.result, "rolled-back", summary.reason);
      // How it failed, not what it printed (that is in its own event: molt:notify.includeHookOutput).
      assert.match(
        summary.reason,
        /^postJoin hook failed for new node lab-cp-4 \(its command exited 3\); .*the old nodes were left untouched$/,
      );
      assert.ok(!summary.reason.includes("apiserver not ready"), summary.reason);
      const hook = events.find((e) => e.type === "hook");
      assert.ok(hook?.type === "hook" && hook.output === "apiserver not ready", JSON.stringify(hook));
      assert.deepEqual(images(w), ["lab-cp-1:lab-v1", "lab-cp-2:lab-v1", "lab-cp-3:lab-v1"]);
      assert.equal(w.members.length, 3);
      assert.ok(!w.log.some((l) => l.startsWith("etcd memberRemove 1 ") || l.startsWith("etcd moveLeader")));
    });

    it("molt:notify.includeHookOutput puts a failed hook's last lines (redacted) into the reason", async () => {
      stack("lab-v2", {
        hooks: { postJoin: { command: "echo 'apiserver not ready, token=abc123' >&2; exit 3" } },
        notify: { includeHookOutput: true },
      });
      const { summary } = await run(FakeWorld.cluster(3, "lab-v1"));
      assert.match(
        summary.reason,
        /^postJoin hook failed for new node lab-cp-4 \(its command exited 3; last output: apiserver not ready, token=\[redacted\]\)/,
      );
    });

    it("a postJoin hook failing on the stack's first node: rolled back, and no word of old nodes", async () => {
      stack("lab-v1", { replicas: 1, hooks: { postJoin: { command: "exit 3" } } });
      const w = new FakeWorld();
      const { summary, events } = await run(w);
      assert.equal(summary.result, "rolled-back", summary.reason);
      assert.deepEqual(w.list, []);
      const said = events.map((e) => JSON.stringify(e)).join("\n");
      assert.ok(!/old nodes|existing nodes/.test(said), said);
      assert.match(summary.reason, /it was the stack's first node, so the stack has no node now; run molt again/);
    });

    it("a failing hook's phase is a failure too, and human output says so once, with ✗", async () => {
      stack("lab-v2", { hooks: { postJoin: { command: "exit 3" } } });
      const { events } = await run(FakeWorld.cluster(3, "lab-v1"));
      const phase = events.find((e) => e.type === "phase" && e.phase === "hook");
      assert.ok(phase?.type === "phase" && phase.ok === false, JSON.stringify(phase));
      let text = "";
      const render = humanRenderer({ write: (s) => void (text += s), tty: false });
      for (const e of events) render(e);
      const lines = text.split("\n").filter((l) => / hook \(|\(hook /.test(l));
      assert.deepEqual(
        lines.map((l) => l.slice(10).replace(/\d+\.\ds/, "Ns")),
        ["  ✗ postJoin hook (command) for lab-cp-4 Ns: exited 3"],
      );
    });

    describe("a hook that prints secrets, with a webhook", () => {
      const TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
      const KEY_BODY = "MIIEpAIBAAKCAQEA7secretKeyBody";
      const SECRETS = [TOKEN, "hunter2-secret", KEY_BODY, "AKIAIOSFODNN7EXAMPLE"];
      const PRINTS =
        `echo "cloning with ${TOKEN}"; echo "password=hunter2-secret"; echo "aws AKIAIOSFODNN7EXAMPLE"; ` +
        `printf -- '-----BEGIN RSA PRIVATE KEY-----\\n${KEY_BODY}\\n-----END RSA PRIVATE KEY-----\\n'; ` +
        `echo "the last words" >&2; exit 3`;
      let server: Server;
      let url = "";
      const bodies: string[] = [];
      before(async () => {
        server = createServer((req, res) => {
          let body = "";
          req.on("data", (c) => (body += c));
          req.on("end", () => {
            bodies.push(body);
            res.writeHead(200).end();
          });
        });
        await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
        url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/molt`;
      });
      after(() => server.close());
      beforeEach(() => (bodies.length = 0));

      const roll = async (includeHookOutput?: boolean) => {
        stack("lab-v2", {
          hooks: { postJoin: { command: PRINTS } },
          ...(includeHookOutput ? { notify: { includeHookOutput } } : {}),
        });
        const notifier = new WebhookNotifier(url, { ...(includeHookOutput ? { includeHookOutput } : {}) });
        const events: RolloutEvent[] = [];
        const { summary } = await run(FakeWorld.cluster(3, "lab-v1"), {
          onEvent: (e) => {
            events.push(e);
            notifier.handle(e);
          },
        });
        await notifier.flush();
        return { summary, events, sent: bodies.map((b) => JSON.parse(b) as { event: RolloutEvent }) };
      };

      it("the webhook hears the failure without the hook's output; the local events show it redacted", async () => {
        const { summary, events, sent } = await roll();
        assert.equal(summary.result, "rolled-back", summary.reason);
        for (const b of bodies) for (const secret of [...SECRETS, "the last words"]) assert.ok(!b.includes(secret), b);
        const hook = sent.find((b) => b.event.type === "hook")?.event;
        assert.ok(hook?.type === "hook" && !hook.ok && hook.error === "exited 3", JSON.stringify(hook));
        assert.ok(!("output" in hook), "no output key");
        assert.deepEqual(
          sent.map((b) => b.event.type),
          ["start", "hook", "decision", "summary"],
        );
        // Locally: every line, redacted; the key's body not at all.
        const lines = events.flatMap((e) => (e.type === "hook-output" ? [e.line] : []));
        assert.deepEqual(lines.sort(), [
          "-----BEGIN RSA PRIVATE KEY-----[redacted]",
          "-----END RSA PRIVATE KEY-----",
          "aws [redacted]",
          "cloning with [redacted]",
          "password=[redacted]",
          "the last words",
        ]);
        const local = JSON.stringify(events);
        for (const secret of SECRETS) assert.ok(!local.includes(secret), secret);
        const done = events.find((e) => e.type === "hook");
        assert.ok(done?.type === "hook" && done.output.includes("password=[redacted]"), JSON.stringify(done));
      });

      it("with molt:notify.includeHookOutput the webhook gets the output, redacted", async () => {
        const { sent } = await roll(true);
        for (const b of bodies) for (const secret of SECRETS) assert.ok(!b.includes(secret), b);
        const hook = sent.find((b) => b.event.type === "hook")?.event;
        assert.ok(hook?.type === "hook" && hook.output.includes("cloning with [redacted]"), JSON.stringify(hook));
        const summary = sent.find((b) => b.event.type === "summary")?.event;
        assert.ok(
          summary?.type === "summary" && /last output: .*the last words/.test(summary.reason),
          JSON.stringify(summary),
        );
      });
    });

    it("a hook past its timeout fails; with --on-failure pause the new node is left for inspection", async () => {
      stack("lab-v2", { hooks: { postJoin: { command: "exec sleep 30", timeoutSeconds: 1 } } });
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary } = await run(w, { onFailure: "pause" });
      assert.equal(summary.result, "paused", summary.reason);
      assert.match(summary.reason, /timed out after 1s/);
      assert.equal(w.list.length, 4);
    });

    it("a failing preRetire hook stops the run with nothing removed", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const { summary, events } = await run(w, {
        hooks: {
          preRetire: async () => {
            throw new Error("the node still serves traffic");
          },
        },
      });
      assert.equal(summary.result, "failed", summary.reason);
      assert.match(
        summary.reason,
        /PreRetireHook: preRetire hook failed for lab-cp-1 \(the library callback threw an error\).*nothing was removed/,
      );
      assert.ok(!summary.reason.includes("still serves traffic"), "the callback's message is its output");
      const hook = events.find((e) => e.type === "hook" && !e.ok);
      assert.ok(hook?.type === "hook" && hook.output === "the node still serves traffic", JSON.stringify(hook));
      assert.equal(w.members.length, 4);
      assert.ok(!w.log.some((l) => l.startsWith("etcd memberRemove") || l.startsWith("etcd moveLeader")));
    });

    it("after a crash right after a surge, the rerun runs postJoin again (at least once, never skipped)", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const calls: string[] = [];
      const hooks = { postJoin: async (c: { node: string }) => void calls.push(c.node) };
      w.faults.crashAfterApply = 1;
      await assert.rejects(run(w, { hooks }), /simulated crash/);
      assert.deepEqual(calls, []);
      const { summary } = await run(w, { hooks });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(calls, ["lab-cp-4", "lab-cp-5", "lab-cp-6"]);
    });

    it("maxSurge 0: after a crash right after a join, the rerun runs postJoin before the next retirement", async () => {
      stack("lab-v2", { maxSurge: 0 });
      const w = FakeWorld.cluster(3, "lab-v1");
      const calls: string[] = [];
      const hooks = {
        postJoin: async (c: { node: string }) => {
          calls.push(c.node);
          w.log.push(`hook postJoin ${c.node}`);
        },
      };
      // Retire first: the old node's machine goes (apply 1), then the new node joins (apply 2).
      w.faults.crashAfterApply = 2;
      await assert.rejects(run(w, { hooks }), /simulated crash/);
      assert.deepEqual(calls, []);
      assert.deepEqual(images(w), ["lab-cp-2:lab-v1", "lab-cp-3:lab-v1", "lab-cp-4:lab-v2"]);
      w.log.length = 0;
      const { summary } = await run(w, { hooks });
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(calls, ["lab-cp-4", "lab-cp-5", "lab-cp-6"]);
      // lab-cp-4's hook came before anything touched the next old node.
      const i = (prefix: string) => w.log.findIndex((l) => l.startsWith(prefix));
      assert.ok(i("hook postJoin lab-cp-4") >= 0, w.log.join("\n"));
      const retirement = w.log.findIndex((l) => /^(etcd memberRemove|etcd moveLeader|up prune)/.test(l));
      assert.ok(retirement > i("hook postJoin lab-cp-4"), w.log.join("\n"));
    });

    it("refuses a lab another stack owns before anything is changed, naming the owner", async () => {
      stack("lab-v2");
      const w = FakeWorld.cluster(3, "lab-v1");
      const other = labOwner("other", "s3://state/molt");
      releaseLab(join(dir, "lab"), "loop", labOwner("lab", env.PULUMI_BACKEND_URL));
      claimLab(join(dir, "lab"), "loop", other);
      try {
        await assert.rejects(
          run(w),
          (e: Error) => e.name === "LabOwnedError" && /lab loop belongs to stack other/.test(e.message),
        );
        assert.deepEqual(w.log, []);
        assert.equal(readLabClaim(join(dir, "lab"), "loop")?.stack, "other");
      } finally {
        releaseLab(join(dir, "lab"), "loop", other);
      }
    });

    it("claims its lab before its first change, for this stack in this backend", async () => {
      stack("lab-v2");
      const { summary } = await run(FakeWorld.cluster(3, "lab-v1"));
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(
        (({ stack, backend }) => ({ stack, backend }))(readLabClaim(join(dir, "lab"), "loop")!),
        labOwner("lab", env.PULUMI_BACKEND_URL),
      );
    });

    it("refuses to start outside the maintenance window, changing nothing", async () => {
      stack("lab-v2", { rollout: { window: { days: ["sat"], start: "01:00", end: "05:00", timeZone: "UTC" } } });
      const w = FakeWorld.cluster(3, "lab-v1");
      await assert.rejects(
        run(w, { wallClock: () => Date.parse("2026-12-01T03:00:00Z") }), // a Tuesday
        (e: Error) => e.name === "OutsideWindowError" && /opens 2026-12-05 01:00 UTC/.test(e.message),
      );
      assert.deepEqual(w.log, []);
    });

    it("says at its start which window it runs in and when that closes", async () => {
      stack("lab-v2", { rollout: { window: { start: "22:00", end: "04:00", timeZone: "Europe/Berlin" } } });
      const w = FakeWorld.cluster(3, "lab-v1");
      const { events } = await run(w, { wallClock: () => Date.parse("2026-12-01T00:30:00Z") }); // 01:30 in Berlin
      const start = events.find((e) => e.type === "start");
      assert.deepEqual(start?.type === "start" && start.window, {
        window: "every day 22:00-04:00 Europe/Berlin",
        closesAt: "2026-12-01T04:00:00+01:00",
        closesInSeconds: 2.5 * 3600,
      });
      stack("lab-v2");
      const none = (await run(FakeWorld.cluster(3, "lab-v1"))).events.find((e) => e.type === "start");
      assert.ok(none?.type === "start" && !("window" in none), "no window, nothing said");
    });

    it("stops as paused at the next replacement boundary when the window closes mid-run", async () => {
      stack("lab-v2", {
        rollout: { window: { start: "22:00", end: "04:00", timeZone: "Europe/Berlin" } },
      });
      const w = FakeWorld.cluster(3, "lab-v1");
      let t = Date.parse("2026-12-01T02:58:00Z"); // 03:58 in Berlin: open
      const { summary } = await run(w, {
        wallClock: () => t,
        beforeOperation: async (op) => {
          // The window closes while the first replacement is under way (between its surge and retirement).
          if (op.kind === "move-leader" || op.kind === "remove-member") t = Date.parse("2026-12-01T03:01:00Z");
        },
      });
      assert.equal(summary.result, "paused", summary.reason);
      assert.match(summary.reason, /maintenance window \(every day 22:00-04:00 Europe\/Berlin\) is closed/);
      assert.deepEqual(summary.replaced, ["lab-cp-1"]);
      assert.deepEqual(ups(w), ["up surge lab-cp-4", "up prune lab-cp-1"]);
      assert.equal(w.members.length, 3);
    });

    it("replaces only the node whose certificate expires within replaceCertificatesExpiringWithinDays", async () => {
      stack("lab-v1", { rollout: { replaceCertificatesExpiringWithinDays: 30 } });
      const w = FakeWorld.cluster(3, "lab-v1");
      w.certificates["lab-cp-2"] = new Date(Date.now() + 3 * 86_400_000).toUTCString().replace(/^\w+, /, "");
      const { summary } = await run(w);
      assert.equal(summary.result, "succeeded", summary.reason);
      assert.deepEqual(summary.replaced, ["lab-cp-2"]);
      assert.deepEqual(
        w.list.map((n) => n.name),
        ["lab-cp-1", "lab-cp-3", "lab-cp-4"],
      );
      assert.equal((await run(w)).summary.result, "noop");
    });
  });
});
