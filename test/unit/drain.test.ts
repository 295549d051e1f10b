// The drain policy (orchestrator/core/drain.ts) and the drain act that follows it
// (orchestrator/act/kube.ts), over a stub Kubernetes edge that only lists and evicts.
import * as assert from "node:assert/strict";
import { drain, evictRound } from "../../orchestrator/act/kube";
import type { ActContext } from "../../orchestrator/act/context";
import type { Eviction, KubeEdge } from "../../orchestrator/core/edges";
import { isEvictable, needsDrain, podStep, type PodLike } from "../../orchestrator/core/drain";
import type { Intent, Operation } from "../../orchestrator/core/model";

const pod = (name: string, o: { controller?: boolean; terminating?: boolean; kind?: string } = {}): PodLike => ({
  metadata: {
    name,
    namespace: "apps",
    ownerReferences: o.controller === false ? [] : [{ kind: o.kind ?? "ReplicaSet", controller: true }],
    ...(o.terminating ? { deletionTimestamp: "2026-12-03T00:00:00Z" } : {}),
  },
  status: { phase: "Running" },
});

/** A node's pods, and what the Eviction API answers for each; evicted pods leave. */
function stubKube(pods: PodLike[], answers: Record<string, Eviction> = {}) {
  const calls: string[] = [];
  let left = [...pods];
  const kube = {
    cordon: async (_via: string, node: string) => void calls.push(`cordon ${node}`),
    podsOn: async () => left,
    evict: async (_via: string, namespace: string, name: string): Promise<Eviction> => {
      calls.push(`evict ${namespace}/${name}`);
      const a = answers[name] ?? { kind: "evicted" };
      if (a.kind !== "refused") left = left.filter((p) => p.metadata?.name !== name);
      return a;
    },
  } as unknown as KubeEdge;
  return { kube, calls };
}

function ctxOf(kube: KubeEdge, drainSeconds: number): ActContext {
  return {
    edges: { nodes: { kube: async () => kube } } as unknown as ActContext["edges"],
    world: {} as ActContext["world"],
    intent: { timeouts: { joinSeconds: 60, settleSeconds: 30, drainSeconds } } as unknown as Intent,
    pollMs: 10,
    timed: (_phase, _op, _node, fn) => fn(),
    report: () => undefined,
  };
}

const op = { kind: "drain", node: "cp-1", via: "cp-4", reason: "" } as Extract<Operation, { kind: "drain" }>;

describe("the drain policy (orchestrator/core/drain.ts)", () => {
  it("evicts what kubectl drain --ignore-daemonsets evicts", () => {
    const owned = (kind: string) => ({ metadata: { ownerReferences: [{ kind }] }, status: { phase: "Running" } });
    assert.equal(isEvictable(owned("ReplicaSet")), true);
    assert.equal(isEvictable(owned("StatefulSet")), true);
    assert.equal(
      isEvictable(owned("DaemonSet")),
      false,
      "DaemonSet pods stay (their controller would recreate them there)",
    );
    assert.equal(
      isEvictable({
        metadata: { annotations: { "kubernetes.io/config.mirror": "abc" } },
        status: { phase: "Running" },
      }),
      false,
      "mirror pods of static pods stay",
    );
    assert.equal(isEvictable({ ...owned("ReplicaSet"), status: { phase: "Succeeded" } }), false);
    assert.equal(isEvictable({ ...owned("Job"), status: { phase: "Failed" } }), false);
    assert.equal(
      isEvictable({ metadata: {}, status: { phase: "Pending" } }),
      true,
      "a naked pod counts (the drain then refuses to evict it)",
    );
  });

  it("evicts a controlled pod, waits for a terminating one, refuses one no controller recreates", () => {
    assert.deepEqual(podStep(pod("web-1")), { kind: "evict", namespace: "apps", name: "web-1" });
    assert.deepEqual(podStep(pod("web-2", { terminating: true })), { kind: "wait" });
    const naked = podStep(pod("naked", { controller: false }));
    assert.equal(naked.kind, "refuse");
    assert.match((naked as { reason: string }).reason, /^apps\/naked: not managed by a controller.*--force/);
  });

  it("drains a retiring node that still takes pods or still has pods to evict", () => {
    assert.equal(needsDrain({ unschedulable: false }, 0), true, "not cordoned yet");
    assert.equal(needsDrain({ unschedulable: true }, 2), true, "cordoned, pods left");
    assert.equal(needsDrain({ unschedulable: true }, 0), false, "cordoned and empty: drained");
    assert.equal(needsDrain(undefined, 3), false, "no Node: nothing to drain");
  });
});

describe("the drain act (orchestrator/act/kube.ts), over a stub Kubernetes edge", () => {
  it("asks the edge to evict only what the policy evicts, and reports what was refused", async () => {
    const { kube, calls } = stubKube(
      [
        pod("web-1"),
        pod("web-2", { terminating: true }),
        pod("naked", { controller: false }),
        pod("ds", { kind: "DaemonSet" }),
        pod("db-0"),
      ],
      { "db-0": { kind: "refused", message: "Cannot evict pod as it would violate the pod's disruption budget." } },
    );
    const round = await evictRound(kube, "cp-4", "cp-1");
    assert.deepEqual(calls.sort(), ["evict apps/db-0", "evict apps/web-1"]);
    assert.equal(round.remaining, 4, "the DaemonSet pod does not count; the terminating one does");
    assert.deepEqual(round.blocked.sort(), [
      "apps/db-0: Cannot evict pod as it would violate the pod's disruption budget.",
      "apps/naked: not managed by a controller, so an eviction would lose it for good (kubectl drain refuses it " +
        "without --force); move or delete it yourself",
    ]);
  });

  it("cordons, evicts until none is left, and is done", async () => {
    const { kube, calls } = stubKube([pod("web-1"), pod("web-2")]);
    assert.deepEqual(await drain(op, ctxOf(kube, 5)), { kind: "done" });
    assert.equal(calls[0], "cordon cp-1");
    assert.deepEqual(calls.slice(1).sort(), ["evict apps/web-1", "evict apps/web-2"]);
  });

  it("an API call aborted by its own timeout is a failure, not the run being cancelled", async () => {
    // node-fetch names an aborted request "AbortError" whatever aborted it; only the run's
    // signal is a cancel (before: a drain whose API server stopped answering reported done).
    const { kube } = stubKube([pod("web-1")]);
    const aborted = Object.assign(new Error("The user aborted a request."), { name: "AbortError" });
    (kube as unknown as { podsOn: () => Promise<never> }).podsOn = async () => {
      throw aborted;
    };
    await assert.rejects(drain(op, ctxOf(kube, 5)), /The user aborted a request/);
    const ac = new AbortController();
    ac.abort();
    assert.deepEqual(await drain(op, { ...ctxOf(kube, 5), signal: ac.signal }), { kind: "done" }, "a cancel is");
  });

  it("stops the run when the drain outlives molt:timeouts.drainSeconds, saying what blocked it", async () => {
    const { kube } = stubKube([pod("db-0")], { "db-0": { kind: "refused", message: "disruption budget" } });
    const outcome = await drain(op, ctxOf(kube, 1));
    assert.equal(outcome.kind, "stop");
    const reason = (outcome as { reason: string }).reason;
    assert.match(reason, /^drain of cp-1 did not finish within 1s \(molt:timeouts.drainSeconds\)/);
    assert.match(reason, /evictions refused: apps\/db-0: disruption budget\./);
    assert.match(reason, /No node was removed: cp-1 stays cordoned/);
  });

  it("is done soon after the evicted pods are gone, not a whole round later", async () => {
    // Evicted pods stay listed for 150 ms (their controller's replacement elsewhere, the
    // kubelet confirming the deletion), as on a cluster.
    let evictedAt = 0;
    const kube = {
      cordon: async () => undefined,
      podsOn: async () => (evictedAt && Date.now() - evictedAt >= 150 ? [] : [pod("web-1")]),
      evict: async (): Promise<Eviction> => {
        evictedAt ||= Date.now();
        return { kind: "evicted" };
      },
    } as unknown as KubeEdge;
    const started = Date.now();
    assert.deepEqual(await drain(op, ctxOf(kube, 5)), { kind: "done" });
    const took = Date.now() - started;
    assert.ok(took < 700, `the drain took ${took} ms after pods that left within 150 ms`);
  });

  it("asks a refused eviction again once a round, however often it looks", async () => {
    const { kube, calls } = stubKube([pod("db-0")], { "db-0": { kind: "refused", message: "disruption budget" } });
    const outcome = await drain(op, ctxOf(kube, 2));
    assert.equal(outcome.kind, "stop");
    const evictions = calls.filter((c) => c.startsWith("evict")).length;
    assert.ok(evictions >= 2 && evictions <= 3, `${evictions} evictions in a 2 s drain: one a second`);
    assert.match((outcome as { reason: string }).reason, /evictions refused: apps\/db-0: disruption budget\./);
  });
});
