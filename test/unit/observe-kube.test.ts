// observeKube (orchestrator/observe.ts): the cluster is read through the newest ready API
// server, and through the newest node's while the components are read; that read is kept only
// when the components name that node.
import * as assert from "node:assert/strict";
import { observeKube } from "../../orchestrator/observe";
import type { KubeEdge } from "../../orchestrator/core/edges";
import type { ComponentHealth, KubeObservation } from "../../orchestrator/core/observations";
import type { NodeEntry } from "../../orchestrator/core/nodes";

const node = (name: string, generation: number): NodeEntry => ({
  name,
  image: "k8s-v1.37.2",
  kubernetesVersion: "1.37.2",
  role: "control-plane",
  generation,
  init: generation === 1,
});
const NODES = [node("cp-1", 1), node("cp-2", 2), node("cp-3", 3)];

const health = (apiserverOk: boolean): ComponentHealth => ({
  apiserver: apiserverOk ? { ok: true, version: "1.37.2" } : { ok: false, error: "connection refused" },
  controllerManager: { ok: true },
  scheduler: { ok: true },
});

/**
 * A Kubernetes edge whose components answer when released (so the order of calls is seen) and
 * whose cluster read names the node it went through (in its Node list) or fails where told.
 * `notReady` can change between passes.
 */
function stubKube(o: { notReady?: string[]; clusterFails?: Record<string, number> }) {
  const calls: string[] = [];
  const fails = { ...o.clusterFails };
  const notReady = new Set(o.notReady);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const kube = {
    components: async (n: string) => {
      calls.push(`components ${n}`);
      await released;
      return health(!notReady.has(n));
    },
    observeCluster: async (via: string) => {
      calls.push(`cluster ${via}`);
      if ((fails[via] ?? 0) > 0) {
        fails[via]--;
        throw new Error(`read through ${via} failed`);
      }
      return {
        nodes: [{ name: `read-through-${via}`, ready: true, unschedulable: false }],
        evictable: {},
      };
    },
  } as unknown as KubeEdge;
  return { kube, calls, release, notReady };
}

/** The observation names `node` as its way in, and its cluster read went through that node. */
function readThrough(k: KubeObservation, node: string): void {
  assert.equal(k.via, node);
  assert.deepEqual(
    k.nodes.map((n) => n.name),
    [`read-through-${node}`],
  );
}

describe("observeKube: the cluster read through the newest ready API server", () => {
  it("reads the cluster through the newest node while its components are read, once", async () => {
    const s = stubKube({});
    const pending = observeKube(s.kube, NODES);
    await new Promise((r) => setImmediate(r));
    // Before any component answered, the newest node's cluster read is under way.
    assert.ok(s.calls.includes("cluster cp-3"), s.calls.join(", "));
    s.release();
    const k = await pending;
    readThrough(k, "cp-3");
    assert.equal(s.calls.filter((c) => c.startsWith("cluster")).length, 1);
  });

  it("uses the next ready node's read when the newest API server is not ready", async () => {
    const s = stubKube({ notReady: ["cp-3"] });
    const pending = observeKube(s.kube, NODES);
    s.release();
    const k = await pending;
    readThrough(k, "cp-2");
    assert.deepEqual(
      s.calls.filter((c) => c.startsWith("cluster")),
      ["cluster cp-3", "cluster cp-2"],
    );
  });

  it("reads again through the newest node when its early read failed but it is ready", async () => {
    const s = stubKube({ clusterFails: { "cp-3": 1 } });
    const pending = observeKube(s.kube, NODES);
    s.release();
    const k = await pending;
    readThrough(k, "cp-3");
    assert.equal(s.calls.filter((c) => c === "cluster cp-3").length, 2);
  });

  it("fails as before when the read through the chosen node fails twice", async () => {
    const s = stubKube({ clusterFails: { "cp-3": 2 } });
    const pending = observeKube(s.kube, NODES);
    s.release();
    await assert.rejects(pending, /read through cp-3 failed/);
  });

  it("says no API server is ready when none is, whatever the early read did", async () => {
    const s = stubKube({ notReady: ["cp-1", "cp-2", "cp-3"], clusterFails: { "cp-3": 1 } });
    const pending = observeKube(s.kube, NODES);
    s.release();
    await assert.rejects(pending, /no kube-apiserver is ready \(cp-1: connection refused; cp-2/);
  });

  it("asks early through the last pass's node, not again through a newest that is not ready", async () => {
    const s = stubKube({ notReady: ["cp-3"] });
    s.release();
    readThrough(await observeKube(s.kube, NODES), "cp-2");
    assert.deepEqual(
      s.calls.filter((c) => c.startsWith("cluster")),
      ["cluster cp-3", "cluster cp-2"],
    );
    s.calls.length = 0;
    // cp-3 still not ready (its API server may hang): the next pass asks cp-2 alone.
    readThrough(await observeKube(s.kube, NODES), "cp-2");
    assert.deepEqual(
      s.calls.filter((c) => c.startsWith("cluster")),
      ["cluster cp-2"],
    );
    s.calls.length = 0;
    // cp-3 ready: its read is taken after the components name it, and asked early from then on.
    s.notReady.delete("cp-3");
    readThrough(await observeKube(s.kube, NODES), "cp-3");
    assert.deepEqual(
      s.calls.filter((c) => c.startsWith("cluster")),
      ["cluster cp-2", "cluster cp-3"],
    );
    s.calls.length = 0;
    readThrough(await observeKube(s.kube, NODES), "cp-3");
    assert.deepEqual(
      s.calls.filter((c) => c.startsWith("cluster")),
      ["cluster cp-3"],
    );
  });

  it("asks early through the newest node when the last pass's node is gone from the list", async () => {
    const s = stubKube({});
    s.release();
    readThrough(await observeKube(s.kube, NODES), "cp-3");
    s.calls.length = 0;
    const later = [node("cp-1", 1), node("cp-2", 2), node("cp-4", 4)];
    readThrough(await observeKube(s.kube, later), "cp-4");
    assert.deepEqual(
      s.calls.filter((c) => c.startsWith("cluster")),
      ["cluster cp-4"],
    );
  });
});
