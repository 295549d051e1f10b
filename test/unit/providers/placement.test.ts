import * as assert from "node:assert/strict";
import fc from "fast-check";
import {
  selectFailureDomainForNewNode,
  selectFailureDomainForRetirement,
  selectNodeForRetirement,
  type PlacedNode,
} from "../../../orchestrator/core/placement";

const zones = ["a", "b", "c"];
let gen = 0;
const n = (failureDomain: string | undefined, upToDate: boolean, generation = ++gen): PlacedNode => ({
  name: `n${generation}`,
  failureDomain,
  upToDate,
  generation,
});

describe("failure-domain placement", () => {
  describe("selectFailureDomainForNewNode", () => {
    const table: Array<[string, PlacedNode[], string]> = [
      ["puts the first node of a cluster in the first domain", [], "a"],
      [
        "puts the new node in the zone with the fewest up-to-date nodes",
        [n("a", true), n("b", true), n("c", false), n("a", false), n("b", false)],
        "c",
      ],
      [
        "counts only up-to-date nodes first, whatever the outdated ones",
        [n("a", false), n("a", false), n("b", true), n("c", true)],
        "a",
      ],
      [
        "breaks a tie on up-to-date nodes by fewest nodes overall",
        [n("a", false), n("b", false), n("b", true), n("c", true), n("a", true)],
        "c",
      ],
      ["ignores nodes in domains no longer configured", [n("x", true), n("x", true), n("a", true), n("b", true)], "c"],
    ];
    for (const [title, nodes, want] of table) {
      it(title, () => assert.equal(selectFailureDomainForNewNode(zones, nodes), want));
    }

    it("has nothing to choose on providers without failure domains", () => {
      assert.equal(selectFailureDomainForNewNode([], [n(undefined, false)]), undefined);
    });

    it("refuses a domain list with duplicates", () => {
      assert.throws(() => selectFailureDomainForNewNode(["a", "a"], []), /distinct/);
    });
  });

  describe("selectFailureDomainForRetirement / selectNodeForRetirement", () => {
    it("retires from the domain with the most nodes among those holding an outdated node", () => {
      const nodes = [n("a", false), n("a", true), n("b", false), n("c", false), n("c", true), n("c", true)];
      const outdated = nodes.filter((x) => !x.upToDate);
      assert.deepEqual(selectFailureDomainForRetirement(zones, nodes, outdated), { domain: "c" });
    });

    it("retires the oldest outdated node of that domain", () => {
      const old = n("b", false, 1);
      const newer = n("b", false, 7);
      const nodes = [newer, old, n("a", false, 3), n("b", true, 9)];
      assert.equal(
        selectNodeForRetirement(
          zones,
          nodes,
          nodes.filter((x) => !x.upToDate),
        ),
        old,
      );
    });

    it("retires nodes outside every configured domain first", () => {
      const stray = n("gone", false, 5);
      const nodes = [n("a", false, 1), n("a", false, 2), stray];
      assert.equal(selectNodeForRetirement(zones, nodes, nodes), stray);
    });

    it("picks the oldest node on providers without failure domains", () => {
      const nodes = [n(undefined, false, 4), n(undefined, false, 2), n(undefined, true, 6)];
      assert.equal(
        selectNodeForRetirement(
          [],
          nodes,
          nodes.filter((x) => !x.upToDate),
        )?.generation,
        2,
      );
    });

    it("has nothing to retire without candidates", () => {
      assert.equal(selectNodeForRetirement(zones, [n("a", true)], []), undefined);
    });
  });

  describe("properties", () => {
    const domainsArb = fc.uniqueArray(fc.constantFrom<string>("a", "b", "c", "d", "e"), { minLength: 1, maxLength: 5 });
    const nodesArb = (domains: string[]) =>
      fc
        .array(
          fc.record({
            failureDomain: fc.option(fc.constantFrom(...domains, "stray"), { nil: undefined }),
            upToDate: fc.boolean(),
          }),
          { maxLength: 12 },
        )
        .map((xs) => xs.map((x, i): PlacedNode => ({ name: `n${i}`, generation: i, ...x })));

    it("a new node never goes to a domain with more up-to-date nodes than another", () => {
      fc.assert(
        fc.property(
          domainsArb.chain((d) => fc.tuple(fc.constant(d), nodesArb(d))),
          ([domains, nodes]) => {
            const chosen = selectFailureDomainForNewNode(domains, nodes);
            assert.ok(chosen !== undefined && domains.includes(chosen));
            const up = (d: string) => nodes.filter((x) => x.upToDate && x.failureDomain === d).length;
            for (const d of domains) assert.ok(up(chosen) <= up(d));
          },
        ),
      );
    });

    it("the retired node is an outdated candidate, and no domain holding a candidate has more nodes", () => {
      fc.assert(
        fc.property(
          domainsArb.chain((d) => fc.tuple(fc.constant(d), nodesArb(d))),
          ([domains, nodes]) => {
            const candidates = nodes.filter((x) => !x.upToDate);
            const chosen = selectNodeForRetirement(domains, nodes, candidates);
            if (candidates.length === 0) return assert.equal(chosen, undefined);
            assert.ok(chosen && candidates.includes(chosen));
            const inKnown = (x: PlacedNode) => x.failureDomain !== undefined && domains.includes(x.failureDomain);
            if (!inKnown(chosen)) return;
            assert.ok(candidates.every(inKnown), "a stray candidate must go first");
            const count = (d: string | undefined) => nodes.filter((x) => x.failureDomain === d).length;
            for (const c of candidates) assert.ok(count(c.failureDomain) <= count(chosen.failureDomain));
            for (const c of candidates.filter((x) => x.failureDomain === chosen.failureDomain))
              assert.ok(c.generation >= chosen.generation);
          },
        ),
      );
    });

    it("a whole add-first rollout keeps domains balanced (max - min <= 1) and ends with every node up to date", () => {
      fc.assert(
        fc.property(domainsArb, fc.integer({ min: 1, max: 7 }), (domains, replicas) => {
          let nodes: PlacedNode[] = [];
          let next = 0;
          for (let i = 0; i < replicas; i++) {
            const d = selectFailureDomainForNewNode(domains, nodes);
            nodes.push({ name: `old${i}`, failureDomain: d, upToDate: false, generation: next++ });
          }
          const spread = () => {
            const counts = domains.map((d) => nodes.filter((x) => x.failureDomain === d).length);
            return Math.max(...counts) - Math.min(...counts);
          };
          assert.ok(spread() <= 1);
          for (let step = 0; step < replicas; step++) {
            const d = selectFailureDomainForNewNode(domains, nodes);
            nodes.push({ name: `new${step}`, failureDomain: d, upToDate: true, generation: next++ });
            const victim = selectNodeForRetirement(
              domains,
              nodes,
              nodes.filter((x) => !x.upToDate),
            );
            assert.ok(victim);
            nodes = nodes.filter((x) => x !== victim);
            assert.ok(spread() <= 1, `unbalanced after step ${step}: ${JSON.stringify(nodes)}`);
          }
          assert.equal(nodes.length, replicas);
          assert.ok(nodes.every((x) => x.upToDate));
        }),
      );
    });
  });
});
