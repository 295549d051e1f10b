// The only changes molt may apply to the stored node list: append the one node a surge
// adds, or drop the one node being pruned. Anything else would let a wrong list destroy nodes.
import * as assert from "node:assert/strict";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import type { Operation } from "../../orchestrator/core/model";
import { assertListTransition } from "../../orchestrator/stack/edge";

const n = (g: number, image = "lab-v1"): NodeEntry => ({
  name: `cp-${g}`,
  image,
  role: "control-plane",
  generation: g,
  init: g === 1,
});
const stored = [n(1), n(2), n(3)];
const surge = (entry: NodeEntry): Operation => ({ kind: "surge", entry, reason: "" });
const prune = (node: string): Operation => ({ kind: "prune", node, reason: "" });
const both = (node: string, entry: NodeEntry): Operation => ({ kind: "prune-and-surge", node, entry, reason: "" });

describe("node list transitions", () => {
  it("allows a surge to append exactly its node", () => {
    assert.doesNotThrow(() => assertListTransition(stored, [...stored, n(4, "lab-v2")], surge(n(4, "lab-v2"))));
  });

  it("allows a prune to drop exactly its node", () => {
    assert.doesNotThrow(() => assertListTransition(stored, [n(1), n(3)], prune("cp-2")));
  });

  it("refuses a surge whose list loses an existing node (a list computed from anywhere but the state)", () => {
    assert.throws(() => assertListTransition(stored, [n(2), n(3), n(4)], surge(n(4))), /refusing/);
  });

  it("refuses a prune of one node that drops another", () => {
    assert.throws(() => assertListTransition(stored, [n(1), n(2)], prune("cp-2")), /refusing/);
  });

  it("refuses dropping two nodes at once, or dropping under a surge", () => {
    assert.throws(() => assertListTransition(stored, [n(1)], prune("cp-2")), /refusing/);
    assert.throws(() => assertListTransition(stored, [n(1), n(2)], surge(n(4))), /refusing/);
  });

  it("refuses changing an existing entry in place (an image change must be a new node)", () => {
    assert.throws(() => assertListTransition(stored, [n(1, "lab-v2"), n(2), n(3), n(4)], surge(n(4))), /refusing/);
  });

  it("refuses reordering existing nodes under a surge", () => {
    assert.throws(() => assertListTransition(stored, [n(2), n(1), n(3), n(4)], surge(n(4))), /refusing/);
  });

  describe("prune-and-surge (molt:rollout.pruneWithNextSurge)", () => {
    const added = n(4, "lab-v2");
    it("allows dropping exactly its node and appending exactly its new one", () => {
      assert.doesNotThrow(() => assertListTransition(stored, [n(2), n(3), added], both("cp-1", added)));
      assert.doesNotThrow(() => assertListTransition(stored, [n(1), n(3), added], both("cp-2", added)));
    });
    it("refuses dropping another node, or none, or two", () => {
      assert.throws(() => assertListTransition(stored, [n(1), n(3), added], both("cp-1", added)), /refusing/);
      assert.throws(() => assertListTransition(stored, [...stored, added], both("cp-1", added)), /refusing/);
      assert.throws(() => assertListTransition(stored, [n(3), added], both("cp-1", added)), /refusing/);
    });
    it("refuses appending another node than its entry, a node already listed, or at another place", () => {
      assert.throws(() => assertListTransition(stored, [n(2), n(3), n(5)], both("cp-1", added)), /refusing/);
      assert.throws(() => assertListTransition(stored, [n(2), n(3), n(3)], both("cp-1", n(3))), /refusing/);
      assert.throws(() => assertListTransition(stored, [added, n(2), n(3)], both("cp-1", added)), /refusing/);
      assert.throws(() => assertListTransition(stored, [n(3), n(2), added], both("cp-1", added)), /refusing/);
    });
    it("refuses changing a kept entry in place", () => {
      assert.throws(() => assertListTransition(stored, [n(2, "lab-v2"), n(3), added], both("cp-1", added)), /refusing/);
    });
    it("refuses a plain prune or surge shaped like it", () => {
      assert.throws(() => assertListTransition(stored, [n(2), n(3), added], prune("cp-1")), /refusing/);
      assert.throws(() => assertListTransition(stored, [n(2), n(3), added], surge(added)), /refusing/);
    });
  });
});
