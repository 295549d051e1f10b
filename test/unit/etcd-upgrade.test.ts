// etcd's patch floors before a member of the next minor joins (orchestrator/core/plan/etcd-upgrade.ts).
import * as assert from "node:assert/strict";
import { ETCD_UPGRADE_FLOORS, etcdUpgradePatchProblem } from "../../orchestrator/core/plan/etcd-upgrade";

const members = (...versions: string[]) => versions.map((version, i) => ({ name: `n${i + 1}`, version }));

describe("etcd's patch floor before the next minor joins", () => {
  const table: [string, string[], string | undefined, RegExp | undefined][] = [
    [
      "3.5.11 members, 3.6 joins (the too-many-learner range)",
      ["3.5.11", "3.5.11", "3.5.11"],
      "3.6.16",
      /n1 \(3\.5\.11\), n2 \(3\.5\.11\), n3 \(3\.5\.11\)/,
    ],
    ["3.5.26 members (the 2025-12 floor), 3.6 joins", ["3.5.26", "3.5.26", "3.5.26"], "3.6.0", /3\.5\.32 or later/],
    ["3.5.31: one below the current floor", ["3.5.31", "3.5.35", "3.5.35"], "3.6.16", /Below it: n1 \(3\.5\.31\)\./],
    ["every member at the floor", ["3.5.32", "3.5.32", "3.5.32"], "3.6.16", undefined],
    ["every member above the floor", ["3.5.35", "3.5.33", "3.5.34"], "3.6.16", undefined],
    ["mid-upgrade: 3.6 and 3.5.35 members", ["3.6.16", "3.5.35", "3.5.35"], "3.6.16", undefined],
    ["mid-upgrade with a low 3.5 member left", ["3.6.16", "3.5.11", "3.6.16"], "3.6.16", /Below it: n2 \(3\.5\.11\)\./],
    ["the same minor: 3.5.35 joins 3.5.11 (the way to the floor)", ["3.5.11", "3.5.11", "3.5.11"], "3.5.35", undefined],
    ["3.6.10 members, 3.7 joins", ["3.6.10", "3.6.16", "3.6.16"], "3.7.3", /upgrade_3_7.*3\.6\.11 or later/],
    ["3.6.16 members, 3.7 joins (the lab's Kubernetes upgrade)", ["3.6.16", "3.6.16", "3.6.16"], "3.7.3", undefined],
    ["3.4 members, 3.5 joins (no floor known)", ["3.4.23", "3.4.23", "3.4.23"], "3.5.35", undefined],
    ["a skipped minor is etcdVersionProblem's, not this rule's", ["3.5.11"], "3.7.3", undefined],
    ["no joining version (a cloud: kubeadm decides)", ["3.5.11"], undefined, undefined],
    ["a version with a v and a suffix", ["v3.5.11+k3s1"], "v3.6.0-rc.1", /n1 \(v3\.5\.11\+k3s1\)/],
    ["an unreadable member version", ["unknown", "3.5.35"], "3.6.16", undefined],
    // The one parser (plan/versions.ts); this rule compares patches, so it needs them.
    ["whitespace around the versions", [" 3.5.11", "3.5.35\n"], " 3.6.16", /Below it: n1 \( 3\.5\.11\)\./],
    ["a member's version without a patch: not judged here (as before)", ["3.5", "3.5.35"], "3.6.16", undefined],
    ["a joining version without a patch: not judged here (as before)", ["3.5.11"], "3.6", undefined],
    ["a fourth number is ignored (as before)", ["3.5.31.9"], "3.6.16", /Below it: n1 \(3\.5\.31\.9\)\./],
  ];
  for (const [title, versions, joining, expected] of table) {
    it(title, () => {
      const problem = etcdUpgradePatchProblem(members(...versions), joining);
      if (expected === undefined) assert.equal(problem, undefined);
      else {
        assert.ok(problem, "refused");
        assert.match(problem, expected);
        assert.match(problem, /Nothing was changed/);
        assert.match(problem, /Roll the cluster to an image with etcd \d+\.\d+\.\d+ or later first/);
      }
    });
  }

  it("names the guide each floor comes from", () => {
    assert.equal(ETCD_UPGRADE_FLOORS["3.5"].floor, "3.5.32");
    assert.match(ETCD_UPGRADE_FLOORS["3.5"].guide, /upgrade_3_6/);
    assert.match(etcdUpgradePatchProblem(members("3.5.20"), "3.6.16")!, /etcd\.io\/docs\/v3\.6\/upgrades\/upgrade_3_6/);
  });
});
