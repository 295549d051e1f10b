// The watched wait (orchestrator/loop/wait-watch.ts) over a scripted re-read and a test clock,
// and the world patch of a re-read node (observe.ts withNode).
import assert from "node:assert/strict";
import { watchOf, watchWait, type WatchOptions } from "../../orchestrator/loop/wait-watch";
import { reobserveAddons, reobserveNode, withNode } from "../../orchestrator/observe";
import type { Edges } from "../../orchestrator/core/edges";
import type { ComponentHealth, KubeObservation } from "../../orchestrator/core/observations";
import type { Operation, World } from "../../orchestrator/core/model";

const wait: Extract<Operation, { kind: "wait" }> = {
  kind: "wait",
  key: "join:cp-4",
  node: "cp-4",
  reason: "waiting for cp-4's control plane (Node not Ready)",
};
const world = { nodes: [] } as unknown as World;

/** A clock that moves `step` ms per reading; the re-read returns the worlds of `script` in turn. */
function options(o: Partial<WatchOptions> & { script: (World | Error)[]; step?: number }): {
  o: WatchOptions;
  reads: () => number;
} {
  let t = 0;
  let reads = 0;
  const step = o.step ?? 100;
  const base: WatchOptions = {
    world,
    op: wait,
    decide: (w) => (w as unknown as { op?: Operation }).op ?? wait,
    reread: async () => {
      const next = o.script[Math.min(reads++, o.script.length - 1)];
      if (next instanceof Error) throw next;
      return next;
    },
    tickMs: 1,
    fullEveryMs: 5_000,
    deadline: Number.MAX_SAFE_INTEGER,
    now: () => (t += step),
  };
  const { script: _s, step: _st, ...rest } = o;
  return { o: { ...base, ...rest }, reads: () => reads };
}
const decidesTo = (op: Operation) => ({ nodes: [], op }) as unknown as World;

describe("a wait watched between full passes", () => {
  it("ends as soon as the re-read world decides something else", async () => {
    const { o, reads } = options({
      script: [world, world, decidesTo({ kind: "drain", node: "cp-1", via: "cp-4" } as unknown as Operation)],
    });
    assert.equal(await watchWait(o), "changed");
    assert.equal(reads(), 3);
  });

  it("ends when the decision is another wait (another key), not only a change", async () => {
    const { o } = options({ script: [decidesTo({ ...wait, key: "health:cp-2", node: "cp-2" })] });
    assert.equal(await watchWait(o), "changed");
  });

  it("keeps the same wait with another reason (a problem solved, another left) without a full pass", async () => {
    const { o, reads } = options({ script: [decidesTo({ ...wait, reason: "scheduler not healthy" })], step: 1000 });
    assert.equal(await watchWait(o), "full-pass");
    assert.ok(reads() >= 2, `re-read ${reads()} times`);
  });

  it("hands over to a full pass after fullEveryMs when nothing changed", async () => {
    const { o, reads } = options({ script: [world], step: 1000, fullEveryMs: 5_000 });
    assert.equal(await watchWait(o), "full-pass");
    // Readings at 1 s steps: the start, then one per tick until 5 s are gone.
    assert.ok(reads() >= 1 && reads() <= 5, `re-read ${reads()} times`);
  });

  it("stops at the wait's deadline, so the next pass sees it expire", async () => {
    const { o } = options({ script: [world], step: 1000, deadline: 3_000 });
    assert.equal(await watchWait(o), "deadline");
  });

  it("a re-read that fails ends the watch (the full pass reads and reports it)", async () => {
    const { o, reads } = options({ script: [world, new Error("14 UNAVAILABLE")] });
    assert.equal(await watchWait(o), "changed");
    assert.equal(reads(), 2);
  });

  it("a cancelled run stops watching at once", async () => {
    const ac = new AbortController();
    ac.abort();
    const { o, reads } = options({ script: [world], signal: ac.signal });
    assert.equal(await watchWait(o), "cancelled");
    assert.equal(reads(), 0);
  });

  it("watches the waits a few reads can end: a join, a node's health, kube-proxy's rollout", () => {
    assert.deepEqual(watchOf(wait), { node: "cp-4" });
    assert.deepEqual(watchOf({ kind: "wait", key: "health:cp-2", node: "cp-2", reason: "" }), { node: "cp-2" });
    assert.deepEqual(watchOf({ kind: "wait", key: "addons", reason: "" }), { addons: true });
    // A load balancer only where it is cheap to ask (the lab's HAProxy), never a cloud API.
    assert.deepEqual(watchOf({ kind: "wait", key: "lb:cp-4", node: "cp-4", reason: "" }, true), { lb: true });
    assert.equal(watchOf({ kind: "wait", key: "lb:cp-4", node: "cp-4", reason: "" }, false), undefined);
    assert.equal(watchOf({ kind: "wait", key: "lb:cp-4", node: "cp-4", reason: "" }), undefined);
    for (const key of ["leader", "kube", "vip", "soak:cp-4", "stale-node:cp-9", "retry:remove:cp-1"] as const)
      assert.equal(watchOf({ kind: "wait", key, node: "cp-4", reason: "" }), undefined, key);
    assert.equal(watchOf({ kind: "wait", key: "join:cp-4", reason: "" }), undefined);
    assert.equal(watchOf({ kind: "drain", node: "cp-1", via: "cp-4" } as unknown as Operation), undefined);
  });
});

describe("a re-read node patched into the last pass's world", () => {
  const healthy: ComponentHealth = {
    apiserver: { ok: true, version: "1.37.2" },
    controllerManager: { ok: true },
    scheduler: { ok: true },
  };
  const down: ComponentHealth = {
    apiserver: { ok: false, error: "connection refused" },
    controllerManager: { ok: false, error: "x" },
    scheduler: { ok: false, error: "x" },
  };
  const node = (name: string, ready: boolean, leaseAgeSeconds?: number) => ({
    name,
    ready,
    unschedulable: false,
    controlPlane: true,
    kubeletVersion: "1.37.2",
    ...(leaseAgeSeconds !== undefined ? { leaseAgeSeconds } : {}),
  });
  const kube: KubeObservation = {
    via: "cp-1",
    nodes: [node("cp-1", true, 2), node("cp-4", false, 1)],
    components: { "cp-1": healthy, "cp-4": down },
    evictable: { "cp-1": 2 },
    clusterConfigVersion: "1.37.2",
  };

  it("replaces that node's components and Node, keeps its Lease age and everything else", () => {
    const { leaseAgeSeconds: _l, ...fresh } = node("cp-4", true);
    const k = withNode(kube, "cp-4", healthy, fresh);
    assert.deepEqual(k.components, { "cp-1": healthy, "cp-4": healthy });
    assert.deepEqual(
      k.nodes.find((n) => n.name === "cp-4"),
      node("cp-4", true, 1),
    );
    assert.deepEqual(
      k.nodes.find((n) => n.name === "cp-1"),
      node("cp-1", true, 2),
    );
    assert.deepEqual(k.evictable, kube.evictable);
    assert.equal(k.via, "cp-1");
    assert.deepEqual(kube.components["cp-4"], down, "the last pass's world is not changed");
  });

  it("a Node that is gone is gone from the patched world", () => {
    const k = withNode(kube, "cp-4", down, undefined);
    assert.deepEqual(
      k.nodes.map((n) => n.name),
      ["cp-1"],
    );
  });
});

describe("the reads between full passes (observe.ts), over stub edges", () => {
  const kube = {
    via: "cp-1",
    nodes: [],
    components: {},
    evictable: {},
    kubeProxy: { version: "1.36.3", rolledOut: false },
  } as KubeObservation;
  const etcd = { members: [], status: {}, alarms: [] };
  const stubEdges = (k: Partial<Record<string, unknown>>, etcdFails = false) =>
    ({
      nodes: {
        unreachable: new Map(),
        etcd: async () => ({
          status: async () => {
            if (etcdFails) throw new Error("14 UNAVAILABLE: no connection");
            return { isLearner: false };
          },
          memberList: async () => [],
          alarms: async () => [],
          clusterVersion: async () => "3.6.0",
        }),
        kube: async () => k,
      },
    }) as unknown as Edges;
  const base = { nodes: [{ name: "cp-4" }], etcd, kube } as unknown as World;

  it("the addons wait re-reads kube-proxy's DaemonSet, and a failed read leaves Kubernetes unobserved", async () => {
    const rolled = { version: "1.37.2", rolledOut: true };
    const w = await reobserveAddons(stubEdges({ readKubeProxy: async () => rolled }), base);
    assert.deepEqual(w.kube?.kubeProxy, rolled);
    assert.deepEqual(base.kube?.kubeProxy, { version: "1.36.3", rolledOut: false });
    const failed = await reobserveAddons(
      stubEdges({
        readKubeProxy: async () => {
          throw new Error("connect ECONNREFUSED\nmore");
        },
      }),
      base,
    );
    assert.equal(failed.kube, undefined);
    assert.equal(failed.kubeError, "connect ECONNREFUSED");
  });

  it("a node's wait re-reads etcd and that node's components and Node; a failed etcd read shows as such", async () => {
    const components = { apiserver: { ok: true }, controllerManager: { ok: true }, scheduler: { ok: true } };
    const k = {
      components: async () => components,
      readNode: async (_via: string, name: string) => ({
        name,
        ready: true,
        unschedulable: false,
        controlPlane: true,
        kubeletVersion: "1.37.2",
      }),
    };
    const w = await reobserveNode(stubEdges(k), base, "cp-4");
    assert.deepEqual(w.kube?.components["cp-4"], components);
    assert.equal(w.kube?.nodes.find((n) => n.name === "cp-4")?.ready, true);
    assert.ok(w.etcd?.status["cp-4"]?.ok);
    const down = await reobserveNode(stubEdges(k, true), base, "cp-4");
    assert.equal(down.etcd, undefined);
    assert.match(down.etcdError ?? "", /no voting member answered/);
  });
});
