// Which resources a targeted `up` may touch for one node's change. The engine silently
// skips a targeted delete that an untargeted resource still depends on, so the dependents
// rule is what makes a prune delete anything at all.
import * as assert from "node:assert/strict";
import {
  crossNodeResources,
  orphanedNodes,
  ownerOf,
  targetsFor,
  urnName,
  type StateResource,
} from "../../orchestrator/stack/targets";

const U = (type: string, name: string) => `urn:pulumi:s::molt::${type}::${name}`;
const comp = "molt:lab:ControlPlaneNode";
const child = (node: string, part: string) => U(`${comp}$pulumi-nodejs:dynamic:Resource`, `${node}-${part}`);

/** A lab-like state: every node joined through the first, each after the one before. */
function labState(nodes: string[]): StateResource[] {
  const rs: StateResource[] = [
    { urn: U("pulumi:pulumi:Stack", "molt-s"), type: "pulumi:pulumi:Stack" },
    { urn: U("pulumi:providers:pulumi-nodejs", "default"), type: "pulumi:providers:pulumi-nodejs" },
    { urn: U("pulumi-nodejs:dynamic:Resource", "ssh-client-key"), type: "pulumi-nodejs:dynamic:Resource" },
    { urn: U("molt:lab:LoadBalancer", "api-lb"), type: "molt:lab:LoadBalancer" },
  ];
  nodes.forEach((n, i) => {
    const parent = U(comp, n);
    rs.push({ urn: parent, type: comp, dependencies: [U("molt:lab:LoadBalancer", "api-lb")] });
    for (const part of ["hostkey", "machine", "lb"])
      rs.push({ urn: child(n, part), type: "pulumi-nodejs:dynamic:Resource", parent });
    const seed = i > 0 ? nodes[0] : undefined;
    const prev = i > 0 ? nodes[i - 1] : undefined;
    if (seed)
      rs.push({
        urn: child(n, "join"),
        type: "pulumi-nodejs:dynamic:Resource",
        parent,
        dependencies: [child(n, "machine"), child(seed, "etcd")],
      });
    rs.push({
      urn: child(n, "etcd"),
      type: "pulumi-nodejs:dynamic:Resource",
      parent,
      dependencies: [child(n, "machine"), child(n, "lb"), ...(prev ? [child(prev, "etcd")] : [])],
    });
  });
  return rs;
}

describe("targeted up", () => {
  it("reads the name at the end of a URN", () => {
    assert.equal(urnName(child("s-cp-1", "lb")), "s-cp-1-lb");
    assert.equal(urnName("no-separators"), "no-separators");
  });

  const ownerTable: [string, string[], string | undefined][] = [
    ["s-cp-3", ["s-cp-3"], "s-cp-3"],
    ["s-cp-3-lb", ["s-cp-3"], "s-cp-3"],
    ["s-cp-3-x-lb", ["s-cp-3", "s-cp-3-x"], "s-cp-3-x"],
    ["s-cp-3-lb", ["s-cp-3", "s-cp-3-x"], "s-cp-3"],
    ["s-cp-30-lb", ["s-cp-3"], undefined],
    ["api-lb", ["s-cp-3"], undefined],
    ["ssh-client-key", ["s-cp-1", "s-cp-2"], undefined],
  ];
  for (const [name, nodes, want] of ownerTable) {
    it(`resource ${name} belongs to ${want ?? "no node"} among [${nodes}]`, () =>
      assert.equal(ownerOf(name, nodes), want));
  }

  it("updates the whole stack when the state has no resource of molt's yet", () => {
    assert.equal(targetsFor([], "s-cp-1", []), undefined);
    assert.equal(targetsFor(labState([]).slice(0, 2), "s-cp-1", []), undefined);
  });

  it("a surge targets the new node by name, the cluster-wide resources, and no other node", () => {
    const state = labState(["s-cp-1", "s-cp-2", "s-cp-3"]);
    const p = targetsFor(state, "s-cp-4", ["s-cp-1", "s-cp-2", "s-cp-3"])!;
    assert.ok(p.targets.includes("**::s-cp-4") && p.targets.includes("**::s-cp-4-*"));
    assert.ok(p.targets.includes(U("molt:lab:LoadBalancer", "api-lb")));
    assert.ok(p.targets.includes(U("pulumi-nodejs:dynamic:Resource", "ssh-client-key")));
    assert.ok(!p.targets.some((t) => /s-cp-[123]/.test(t)), `no existing node is targeted: ${p.targets}`);
    assert.ok(!p.targets.some((t) => t.includes("pulumi:providers:") || t.includes("pulumi:pulumi:Stack")));
    assert.deepEqual(p.nodeResources, []);
  });

  it("a prune of the seed node also targets everything that depends on it, transitively", () => {
    const state = labState(["s-cp-1", "s-cp-2", "s-cp-3", "s-cp-4"]);
    const p = targetsFor(state, "s-cp-1", ["s-cp-1", "s-cp-2", "s-cp-3", "s-cp-4"])!;
    assert.deepEqual(
      p.nodeResources,
      [
        U(comp, "s-cp-1"),
        child("s-cp-1", "etcd"),
        child("s-cp-1", "hostkey"),
        child("s-cp-1", "lb"),
        child("s-cp-1", "machine"),
      ].sort(),
    );
    for (const n of ["s-cp-2", "s-cp-3", "s-cp-4"]) {
      assert.ok(p.targets.includes(child(n, "join")), `${n}-join depends on the seed`);
      assert.ok(p.targets.includes(child(n, "etcd")), `${n}-etcd depends on the chain of joins`);
      assert.ok(!p.targets.includes(child(n, "machine")), `${n}-machine does not depend on s-cp-1`);
    }
  });

  it("a prune of the newest node targets only it and the cluster-wide resources", () => {
    const state = labState(["s-cp-1", "s-cp-2", "s-cp-3", "s-cp-4"]);
    const p = targetsFor(state, "s-cp-4", ["s-cp-1", "s-cp-2", "s-cp-3", "s-cp-4"])!;
    assert.ok(!p.targets.some((t) => /s-cp-[123]/.test(t)), `${p.targets}`);
    assert.equal(p.nodeResources.length, 6);
  });

  it("never mistakes one node's resources for another's when one name extends the other", () => {
    const state = labState(["s-cp-3", "s-cp-3-x"]);
    const p = targetsFor(state, "s-cp-3-x", ["s-cp-3", "s-cp-3-x"])!;
    assert.ok(
      p.nodeResources.every((u) => urnName(u).startsWith("s-cp-3-x")),
      `${p.nodeResources}`,
    );
    const q = targetsFor(state, "s-cp-3", ["s-cp-3", "s-cp-3-x"])!;
    assert.ok(
      q.nodeResources.every((u) => !urnName(u).startsWith("s-cp-3-x")),
      `${q.nodeResources}`,
    );
  });

  it("escapes glob characters in a node name", () => {
    const p = targetsFor(labState(["a"]), "we*ird", ["a"])!;
    assert.ok(p.targets.includes("**::we\\*ird"));
  });
});

describe("cross-node resources (the orphan clean-up after a killed up)", () => {
  const nodes = ["s-cp-1", "s-cp-2", "s-cp-3"];
  it("are the resources joined through another node and what depends on them, never a machine", () => {
    const got = crossNodeResources(labState(nodes), nodes).map(urnName);
    // s-cp-2 and s-cp-3 join through s-cp-1 and start after the node before; s-cp-1 depends on no other node.
    assert.deepEqual(got, ["s-cp-2-etcd", "s-cp-2-join", "s-cp-3-etcd", "s-cp-3-join"]);
    assert.ok(!got.some((n) => /machine|hostkey|-lb$/.test(n)));
  });
  it("follow the state a killed prune of the seed left: a dependency on any other node, and its dependents", () => {
    // As after a SIGKILL inside a prune-and-surge of s-cp-1: s-cp-3 was re-registered through
    // s-cp-2 only (the next seed), and its etcd command now depends on its own join alone.
    const killed = labState(nodes).map((r) => {
      const n = urnName(r.urn);
      if (n === "s-cp-3-join") return { ...r, dependencies: [child("s-cp-3", "machine"), child("s-cp-2", "etcd")] };
      if (n === "s-cp-3-etcd") return { ...r, dependencies: [child("s-cp-3", "machine"), child("s-cp-3", "join")] };
      return r;
    });
    const got = crossNodeResources(killed, nodes).map(urnName);
    assert.ok(got.includes("s-cp-3-join"), "a join through a node other than the first");
    assert.ok(got.includes("s-cp-3-etcd"), "reaches no other node itself, but depends on a resource that does");
  });
  it("are none in a one-node state", () => {
    assert.deepEqual(crossNodeResources(labState(["s-cp-1"]), ["s-cp-1"]), []);
  });
});

describe("orphaned nodes", () => {
  const isNode = (n: string) => /^s-cp-\d+(-x)?$/.test(n);
  it("finds the resources of a node the list does not hold, by component and by name", () => {
    const state = labState(["s-cp-1", "s-cp-2", "s-cp-3", "s-cp-4"]);
    assert.deepEqual(orphanedNodes(state, ["s-cp-1", "s-cp-2", "s-cp-3"], isNode), ["s-cp-4"]);
    assert.deepEqual(orphanedNodes(state, ["s-cp-1", "s-cp-2", "s-cp-3", "s-cp-4"], isNode), []);
    // A cloud host key made before its node's component.
    const hostKeyOnly = [
      ...labState(["s-cp-1"]),
      { urn: U("pulumi-nodejs:dynamic:Resource", "s-cp-2-hostkey"), type: "pulumi-nodejs:dynamic:Resource" },
    ];
    assert.deepEqual(orphanedNodes(hostKeyOnly, ["s-cp-1"], isNode), ["s-cp-2"]);
  });
  it("never takes a cluster-wide resource for a node", () => {
    assert.deepEqual(orphanedNodes(labState([]), [], isNode), []);
  });
});
