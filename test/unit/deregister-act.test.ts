// deregister-target for a node removed because it failed or is dead (`drain: false`,
// plan/removal.ts): it leaves the load balancer, and molt does not wait for a drain that a
// dead target cannot do (nor, on a timeout, register a failing node again).
import * as assert from "node:assert/strict";
import { deregisterTarget } from "../../orchestrator/act/endpoint";
import type { ActContext } from "../../orchestrator/act/context";
import type { Edges, LoadBalancerEdge } from "../../orchestrator/core/edges";
import type { NodeEndpoint, World } from "../../orchestrator/core/model";

const endpoint: NodeEndpoint = {
  name: "t-cp-4",
  privateAddress: "10.0.0.4",
  sshHost: "10.0.0.4",
  sshPort: 22,
  hostPublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDeregisterActKey molt",
  providerId: "fake/t-cp-4",
};

describe("deregister-target act (orchestrator/act/endpoint.ts)", () => {
  it("drain: false deregisters once and neither waits for the drain nor registers the node again", async () => {
    const log: string[] = [];
    const lb: LoadBalancerEdge = {
      // A dead target never drains: it stays "draining" for as long as anyone asks.
      observe: async () => {
        log.push("observe");
        return { name: "lb", drainSeconds: 30, targets: { "t-cp-4": { state: "draining" } } };
      },
      deregister: async (n) => void log.push(`deregister ${n.name}`),
      register: async (n) => void log.push(`register ${n.name}`),
    };
    const ctx = {
      edges: { lb } as unknown as Edges,
      world: {
        endpoints: [endpoint],
        lb: { name: "lb", drainSeconds: 30, targets: { "t-cp-4": { state: "unhealthy" } } },
      } as Partial<World> as World,
      intent: { timeouts: { settleSeconds: 1 } } as never,
      pollMs: 10,
      timed: (_phase, _op, _node, fn) => fn(),
      report: () => undefined,
    } as ActContext;
    const out = await deregisterTarget(
      { kind: "deregister-target", node: "t-cp-4", drain: false, reason: "declared dead" },
      ctx,
    );
    assert.deepEqual(out, { kind: "done" });
    assert.deepEqual(log, ["deregister t-cp-4"]);
  });
});
