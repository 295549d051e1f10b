// Which other nodes a change drags into its targeted `up`: the lab program runs under Pulumi
// mocks with the dependencies it registers captured (what the engine would store), and a
// whole roll is replayed the way a targeted `up` keeps state: a targeted resource is stored
// with what this run registered, an untargeted one keeps what it had. The targets of each
// step come from stack/targets.ts, as in a rollout.
import * as assert from "node:assert/strict";
import { buildProgram } from "../../infra/program";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import {
  crossNodeResources,
  nodesWithStoredJoins,
  ownerOf,
  targetsFor,
  urnName,
  type StateResource,
} from "../../orchestrator/stack/targets";
import { LAB_SETTINGS, setLabMocks } from "./program-tree";

interface Req {
  getType(): string;
  getName(): string;
  getParent(): string;
  getDependenciesList(): string[];
  getPropertydependenciesMap(): { forEach(f: (v: { getUrnsList(): string[] }, k: string) => void): void };
}
interface Monitor {
  registerResource(req: Req, cb: (err: unknown, resp?: { getUrn(): string }) => void): Promise<void>;
}

/** The resources one run of the lab program registers, with the dependencies the engine would store. */
async function registered(nodes: NodeEntry[], joining: string[] | undefined): Promise<Map<string, StateResource>> {
  await setLabMocks();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const settings = require("@pulumi/pulumi/runtime/settings") as {
    waitForRPCs(): Promise<void>;
    getMonitor(): Monitor;
  };
  const monitor = settings.getMonitor();
  const seen = new Map<string, StateResource>();
  const register = monitor.registerResource.bind(monitor);
  monitor.registerResource = (req, cb) =>
    register(req, (err, resp) => {
      if (resp) {
        const propertyDependencies: Record<string, string[]> = {};
        req.getPropertydependenciesMap().forEach((v, k) => (propertyDependencies[k] = v.getUrnsList()));
        seen.set(resp.getUrn(), {
          urn: resp.getUrn(),
          type: req.getType(),
          ...(req.getParent() ? { parent: req.getParent() } : {}),
          dependencies: req.getDependenciesList(),
          propertyDependencies,
        });
      }
      cb(err, resp);
    });
  await buildProgram({
    provider: "lab",
    nodes,
    sshUser: "root",
    lab: LAB_SETTINGS,
    joinDeadlineSeconds: 300,
    ...(joining ? { joining } : {}),
  })();
  await settings.waitForRPCs();
  return seen;
}

/** `up --target` as the engine matches it: `**` spans anything, `*` stays within a URN part. */
function matches(urn: string, target: string): boolean {
  const re = target
    .split("**")
    .map((part) =>
      part
        .split("*")
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
        .join("[^:]*"),
    )
    .join(".*");
  return new RegExp(`^${re}$`).test(urn);
}

const entry = (g: number, image: string): NodeEntry => ({
  name: `lab-cp-${g}`,
  image,
  role: "control-plane",
  generation: g,
  init: g === 1,
});

const links = (r: StateResource) => [...(r.dependencies ?? []), ...Object.values(r.propertyDependencies ?? {}).flat()];

/**
 * Creates `size` nodes one `up` each, then rolls them to a new image (surge, prune, ...).
 * Returns, for each surge and each prune, the other nodes whose resources it targeted.
 * `withJoining`: feed the program the nodes each change adds, as stack/edge.ts does. Fails
 * when an untargeted resource keeps a stored dependency the program no longer registers it
 * with: the engine would register that dependency ahead of the program, and then refuse the
 * program's own registration ("Duplicate resource URN").
 */
async function roll(
  size: number,
  withJoining: boolean,
  o: { createOnly?: boolean } = {},
): Promise<{ surges: string[][]; prunes: string[][]; state: Map<string, StateResource>; nodes: NodeEntry[] }> {
  let state = new Map<string, StateResource>();
  let nodes: NodeEntry[] = [];
  const change = async (next: NodeEntry[], node: string) => {
    const names = [...new Set([...nodes, ...next].map((n) => n.name))];
    const plan = targetsFor([...state.values()], node, names);
    // As stack/edge.ts apply: the change's own targets, and whatever still stores a link to another node.
    const targets = plan ? [...plan.targets, ...crossNodeResources([...state.values()], names)] : [];
    const joining = next.filter((n) => !nodes.some((p) => p.name === n.name)).map((n) => n.name);
    const run = await registered(next, withJoining ? joining : undefined);
    const targeted = (urn: string) => !plan || targets.some((t) => matches(urn, t));
    const after = new Map<string, StateResource>();
    for (const [urn, r] of run) {
      if (targeted(urn)) after.set(urn, r);
      else if (state.has(urn)) {
        const stored = state.get(urn)!;
        const unregistered = links(stored).filter((u) => !links(r).includes(u));
        assert.deepEqual(unregistered.map(urnName), [], `${urnName(urn)}, untargeted, keeps links the program dropped`);
        after.set(urn, stored);
      }
    }
    // A targeted `up` deletes only targeted resources the program no longer registers.
    for (const [urn, r] of state) if (!run.has(urn) && !targeted(urn)) after.set(urn, r);
    const others = new Set<string>();
    for (const urn of state.keys()) {
      const owner = ownerOf(urnName(urn), names);
      if (plan && owner && owner !== node && targeted(urn)) others.add(owner);
    }
    state = after;
    nodes = next;
    return [...others].sort();
  };
  for (let g = 1; g <= size; g++) await change([...nodes, entry(g, "lab-v1")], `lab-cp-${g}`);
  const surges: string[][] = [];
  const prunes: string[][] = [];
  for (let g = size + 1; !o.createOnly && g <= 2 * size; g++) {
    surges.push(await change([...nodes, entry(g, "lab-v2")], `lab-cp-${g}`));
    const oldest = nodes[0].name;
    prunes.push(await change(nodes.slice(1), oldest));
  }
  return { surges, prunes, state, nodes };
}

/**
 * What `pulumi preview` by hand would show on `state`: the program run as
 * stack/program-entry.ts runs it (the joins the state still holds), against the state.
 */
async function previewByHand(
  state: Map<string, StateResource>,
  nodes: NodeEntry[],
  joining: (resources: StateResource[], names: string[]) => string[],
): Promise<{ create: string[]; delete: string[]; relinked: string[] }> {
  const run = await registered(
    nodes,
    joining(
      [...state.values()],
      nodes.map((n) => n.name),
    ),
  );
  return {
    create: [...run.keys()].filter((u) => !state.has(u)).map(urnName),
    delete: [...state.keys()].filter((u) => !run.has(u)).map(urnName),
    relinked: [...run]
      .filter(([u, r]) => state.has(u) && links(state.get(u)!).sort().join() !== links(r).sort().join())
      .map(([u]) => urnName(u)),
  };
}

describe("join links between nodes (infra/node.ts joinsInThisUpdate)", () => {
  it("registers a node's join inputs only while it may be created: seed, the node before it, endpoints", async () => {
    const nodes = [1, 2, 3, 4].map((g) => entry(g, "lab-v1"));
    const run = await registered(nodes, ["lab-cp-4"]);
    const names = nodes.map((n) => n.name);
    const linksOf = (node: string) => {
      const found = new Set<string>();
      for (const r of run.values()) {
        if (ownerOf(urnName(r.urn), names) !== node) continue;
        for (const u of [...(r.dependencies ?? []), ...Object.values(r.propertyDependencies ?? {}).flat()]) {
          const other = ownerOf(urnName(u), names);
          if (other && other !== node) found.add(other);
        }
      }
      return [...found].sort();
    };
    for (const n of ["lab-cp-1", "lab-cp-2", "lab-cp-3"]) assert.deepEqual(linksOf(n), [], `${n} has joined`);
    assert.deepEqual(linksOf("lab-cp-4"), ["lab-cp-1", "lab-cp-2", "lab-cp-3"], "seed, endpoints, the node before");
    assert.ok(run.has([...run.keys()].find((u) => urnName(u) === "lab-cp-4-join")!), "the new node's join material");
    assert.equal([...run.keys()].filter((u) => /LabJoinMaterial/.test(u)).length, 1, "none for nodes that joined");
    // Read from the seed while the new machine boots (as the bench's floor does): it waits for
    // the seed's bootstrap, not for the machine; the join waits for both.
    const material = [...run.values()].find((r) => urnName(r.urn) === "lab-cp-4-join")!;
    const deps = (r: typeof material) => [
      ...(r.dependencies ?? []),
      ...Object.values(r.propertyDependencies ?? {}).flat(),
    ];
    const own = deps(material)
      .map(urnName)
      .filter((n) => n.startsWith("lab-cp-4-"));
    assert.deepEqual(own, [], "nothing of the new node (its machine boots meanwhile)");
    assert.ok(deps(material).map(urnName).includes("lab-cp-1-etcd"), "the seed's bootstrap");
    const join = [...run.values()].find((r) => urnName(r.urn) === "lab-cp-4-etcd")!;
    assert.ok(deps(join).map(urnName).includes("lab-cp-4-join"), "the join waits for its material");
    assert.ok(deps(join).map(urnName).includes("lab-cp-4-machine"), "and for its machine");

    const unknown = await registered(nodes, undefined);
    assert.equal(
      [...unknown.keys()].filter((u) => /LabJoinMaterial/.test(u)).length,
      3,
      "not told which nodes are new: every node but the first may join",
    );
  });

  for (const size of [3, 7]) {
    const title = `a ${size}-node roll: a prune re-registers only the node that joined through it, a surge at most one`;
    it(title, async () => {
      const { surges, prunes } = await roll(size, true);
      prunes.forEach((others, i) =>
        assert.deepEqual(others, [`lab-cp-${size + i + 1}`], `prune of lab-cp-${i + 1}: its joiner only`),
      );
      // The first surge: the node created last before the roll still stores its links.
      assert.deepEqual(surges[0], [`lab-cp-${size}`]);
      surges.slice(1).forEach((others, i) => assert.deepEqual(others, [], `surge of lab-cp-${size + i + 2}`));
    });
  }

  for (const [title, size, createOnly] of [
    ["the README's first rollout (3 nodes created)", 3, true],
    ["a 3-node roll", 3, false],
    ["a 5-node roll", 5, false],
  ] as const)
    it(`\`pulumi preview\` by hand after ${title} registers what the state holds: no change`, async () => {
      const { state, nodes } = await roll(size, true, { createOnly });
      const preview = await previewByHand(state, nodes, nodesWithStoredJoins);
      assert.deepEqual(preview, { create: [], delete: [], relinked: [] });
      // And molt's own next change still drops that join (the links the speed work removed stay removed).
      const held = nodesWithStoredJoins(
        [...state.values()],
        nodes.map((n) => n.name),
      );
      assert.deepEqual(held, createOnly ? [`lab-cp-${size}`] : [], "the node the last change added, if any");
    });

  it("without the stored joins, a preview after the first rollout would delete the last node's join", async () => {
    const { state, nodes } = await roll(3, true, { createOnly: true });
    const preview = await previewByHand(state, nodes, () => []);
    assert.deepEqual(preview.delete, ["lab-cp-3-join"]);
  });

  it("without the joining nodes named, every prune re-registers every remaining node (the growth)", async () => {
    const { prunes } = await roll(5, false);
    prunes.forEach((others, i) => assert.equal(others.length, 5, `prune ${i + 1}: ${others.join(", ")}`));
  });
});
