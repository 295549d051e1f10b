// The prune act (orchestrator/act/provision.ts): a machine molt owns is destroyed without
// its teardown, and its Node object goes only after the machine is gone. A destroy that
// fails leaves the Node in place (cordoned, drained): the machine may still run, and a
// kubelet whose Node was deleted would register a fresh, schedulable one.
import * as assert from "node:assert/strict";
import { prune } from "../../orchestrator/act/provision";
import type { ActContext } from "../../orchestrator/act/context";
import type { Edges, KubeEdge, NodeListChange } from "../../orchestrator/core/edges";
import type { NodeEndpoint, World } from "../../orchestrator/core/model";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import { TEARDOWN_SKIPS_ENV, teardownSkipFor } from "../../infra/remote/teardown";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPruneActHostKey molt";
const entry = (g: number): NodeEntry => ({
  name: `t-cp-${g}`,
  image: "k8s-v1.37.2",
  role: "control-plane",
  generation: g,
  init: g === 1,
});
const endpoint = (g: number): NodeEndpoint => ({
  name: `t-cp-${g}`,
  privateAddress: `10.0.0.${g}`,
  sshHost: `10.0.0.${g}`,
  sshPort: 22,
  hostPublicKey: HOST_KEY,
  providerId: `fake/t-cp-${g}`,
});

function context(destroy: "ok" | "fails") {
  const log: string[] = [];
  const applied: NodeListChange[] = [];
  const kube = {
    deleteNode: async (via: string, node: string, o: { machineGone?: boolean } = {}) => {
      log.push(`delete Node ${node} via ${via}${o.machineGone ? " with its pods" : ""}`);
      return [];
    },
  } as Partial<KubeEdge> as KubeEdge;
  const edges = {
    stack: {
      apply: async (change: NodeListChange) => {
        applied.push(change);
        log.push(`up ${change.op.kind} ${change.node}`);
        if (destroy === "fails") throw new Error(`[${change.node}] error: deleting the machine failed`);
      },
    },
    nodes: { kube: async () => kube },
  } as unknown as Edges;
  const ctx = {
    edges,
    world: { nodes: [1, 2, 3, 4].map(entry), endpoints: [1, 2, 3, 4].map(endpoint) } as Partial<World> as World,
    intent: {} as never,
    pollMs: 10,
    timed: (_phase, _op, _node, fn) => fn(),
    report: (e) => void log.push(`event ${e.type}`),
  } as ActContext;
  return { ctx, log, applied };
}

describe("prune act: destroy without a reset, the Node after the machine", () => {
  it("destroys the machine with its teardown skipped, then deletes its Node through another API server", async () => {
    const { ctx, log, applied } = context("ok");
    const out = await prune({ kind: "prune", node: "t-cp-1", deleteNodeVia: "t-cp-4", reason: "retired" }, ctx);
    assert.equal(out.kind, "done");
    assert.deepEqual(log, ["up prune t-cp-1", "delete Node t-cp-1 via t-cp-4 with its pods"]);
    assert.deepEqual(
      applied[0].next.map((n) => n.name),
      ["t-cp-2", "t-cp-3", "t-cp-4"],
    );
    const skip = teardownSkipFor({ host: "10.0.0.1", hostKey: HOST_KEY }, applied[0].teardownEnv ?? {});
    assert.equal(skip?.when, "destroyed", `no reset: ${applied[0].teardownEnv?.[TEARDOWN_SKIPS_ENV]}`);
  });

  it("leaves the Node in place when the destroy fails: the machine may still run its kubelet", async () => {
    const { ctx, log } = context("fails");
    await assert.rejects(
      prune({ kind: "prune", node: "t-cp-1", deleteNodeVia: "t-cp-4", reason: "retired" }, ctx),
      /deleting the machine failed/,
    );
    assert.deepEqual(log, ["up prune t-cp-1"], "no Node deletion after a failed destroy");
  });
});
