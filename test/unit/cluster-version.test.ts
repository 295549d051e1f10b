// etcd's cluster version, which its leader raises on its own a few seconds after every member
// runs a newer minor (orchestrator/core/plan/cluster-version.ts): when a new member waits for
// it, and when a rollout may call itself done.
import * as assert from "node:assert/strict";
import { clusterVersionLag, joinWaitsForClusterVersion } from "../../orchestrator/core/plan/cluster-version";
import type { ClusterVersionResult } from "../../orchestrator/core/model";
import { etcdClusterVersionFields } from "../../orchestrator/inspect";

const members = (...versions: string[]) => versions.map((version, i) => ({ name: `n${i + 1}`, version }));
const reads = (version: string): ClusterVersionResult => ({ ok: true, version, via: "n1" });
const unread: ClusterVersionResult = { ok: false, error: "etcd /version: no answer within 5000 ms" };

describe("etcd's cluster version (plan/cluster-version.ts)", () => {
  describe("a new member: member versions x cluster version x joining -> proceed or wait", () => {
    const table: [string, string[], ClusterVersionResult, string | undefined, "proceed" | "wait"][] = [
      [
        "all 3.6, cluster 3.6: a 3.7 joins (a step's first node)",
        ["3.6.16", "3.6.16", "3.6.16"],
        reads("3.6.0"),
        "3.7.3",
        "proceed",
      ],
      [
        "all 3.7, cluster still 3.6: a 3.8 waits (the chain's next step)",
        ["3.7.3", "3.7.3", "3.7.3"],
        reads("3.6.0"),
        "3.8.0",
        "wait",
      ],
      ["all 3.7, cluster 3.7: a 3.8 joins", ["3.7.3", "3.7.3", "3.7.3"], reads("3.7.0"), "3.8.0", "proceed"],
      ["all 3.6, cluster still 3.5: a 3.7 waits", ["3.6.16", "3.6.16", "3.6.16"], reads("3.5.0"), "3.7.3", "wait"],
      [
        "all 3.6, cluster still 3.5: a 3.6 joins (one minor above it, as etcd upgrades)",
        ["3.6.16", "3.6.16"],
        reads("3.5.0"),
        "3.6.16",
        "proceed",
      ],
      [
        "mid-step: 3.6 and 3.7 members, cluster 3.6: another 3.7 joins",
        ["3.6.16", "3.7.3", "3.6.16"],
        reads("3.6.0"),
        "3.7.3",
        "proceed",
      ],
      [
        "all 3.6, cluster still 3.5: a 3.5 joins (no newer than the cluster version)",
        ["3.6.16", "3.6.16"],
        reads("3.5.0"),
        "3.5.35",
        "proceed",
      ],
      [
        "no etcd version known for the new node (a cloud image)",
        ["3.7.3", "3.7.3"],
        reads("3.6.0"),
        undefined,
        "proceed",
      ],
      [
        "not decided yet, a newer minor than every member runs: waits",
        ["3.6.16", "3.6.16"],
        reads("not_decided"),
        "3.7.3",
        "wait",
      ],
      [
        "not decided yet, the members' own minor: joins",
        ["3.6.16", "3.6.16"],
        reads("not_decided"),
        "3.6.16",
        "proceed",
      ],
      ["unreadable: nothing to judge by, joins", ["3.6.16", "3.6.16"], unread, "3.7.3", "proceed"],
      ["unreadable, the members' own minor: joins", ["3.6.16", "3.6.16"], unread, "3.6.20", "proceed"],
      ["versions with a v and suffixes", ["v3.7.3+k3s1", "3.7.3"], reads("3.6.0"), "v3.8.0-rc.1", "wait"],
      ["no member version readable: nothing to judge", ["unknown"], reads("3.6.0"), "3.8.0", "proceed"],
      // The one parser (plan/versions.ts): what every version rule reads.
      ["a member's version without a patch counts by its minor", ["3.7", "3.7.3"], reads("3.6.0"), "3.8.0", "wait"],
      [
        "a cluster version without a patch (3.7) is read as its minor",
        ["3.7.3", "3.7.3"],
        reads("3.7"),
        "3.8.0",
        "proceed",
      ],
      ["whitespace around every version", [" 3.7.3", "3.7.3\n"], reads(" 3.6.0 "), " 3.8.0", "wait"],
      [
        "junk after the cluster version's minor (was: read as 3.7, joined): not decided, a newer minor waits",
        ["3.7.3", "3.7.3"],
        reads("3.7x"),
        "3.8.0",
        "wait",
      ],
      ["a joining version with junk after its minor: not known, joins", ["3.7.3"], reads("3.6.0"), "3.8x", "proceed"],
    ];
    for (const [title, versions, cluster, joining, expected] of table) {
      it(title, () => {
        const lag = joinWaitsForClusterVersion(members(...versions), cluster, joining);
        assert.equal(lag ? "wait" : "proceed", expected, JSON.stringify(lag));
      });
    }
  });

  describe("done: member versions x cluster version -> settled or lagging", () => {
    const table: [string, string[], ClusterVersionResult, string | undefined][] = [
      ["every member 3.7, cluster 3.7", ["3.7.3", "3.7.3", "3.7.3"], reads("3.7.0"), undefined],
      ["every member 3.7, cluster still 3.6", ["3.7.3", "3.7.3", "3.7.3"], reads("3.6.0"), "3.6.0 -> 3.7"],
      ["mid-step, cluster at the lowest member's minor", ["3.6.16", "3.7.3"], reads("3.6.0"), undefined],
      ["a 3.4 etcd-only cluster", ["3.4.23", "3.4.23"], reads("3.4.0"), undefined],
      ["not decided yet", ["3.6.16"], reads("not_decided"), '"not_decided" (not decided yet) -> 3.6'],
      ["unreadable: no lag judged", ["3.6.16"], unread, undefined],
      // A downgrade enabled (`etcdctl downgrade enable 3.6`) sets it below the members: a lag
      // that never ends on its own, which the deadline's refusal names.
      ["a downgrade enabled: below every member", ["3.7.3", "3.7.3"], reads("3.6.0"), "3.6.0 -> 3.7"],
      ["above the members (cannot happen): not a lag", ["3.6.16"], reads("3.7.0"), undefined],
      ["a cluster version without a patch", ["3.7.3", "3.7.3"], reads("3.7"), undefined],
      ["a cluster version with a leading space", ["3.7.3"], reads(" 3.7.0"), undefined],
      ["a member of a bare minor, cluster behind it", ["3.7", "3.7.3"], reads("3.6.0"), "3.6.0 -> 3.7"],
      [
        "junk after the minor (was: settled as 3.7): not decided",
        ["3.7.3"],
        reads("3.7x"),
        '"3.7x" (not decided yet) -> 3.7',
      ],
      [
        "a non-numeric patch (was: settled as 3.7): not decided",
        ["3.7.3"],
        reads("3.7.x"),
        '"3.7.x" (not decided yet) -> 3.7',
      ],
    ];
    for (const [title, versions, cluster, expected] of table) {
      it(title, () => {
        const lag = clusterVersionLag(members(...versions), cluster);
        assert.equal(lag ? `${lag.seen} -> ${lag.members}` : undefined, expected);
      });
    }
  });

  describe("`molt status --json`: etcdClusterVersion holds only a version or not_decided", () => {
    const table: [string, ClusterVersionResult, Record<string, string>][] = [
      ["read", reads("3.7.0"), { etcdClusterVersion: "3.7.0" }],
      ["not decided yet", reads("not_decided"), { etcdClusterVersion: "not_decided" }],
      ["a bare minor is a version", reads("3.7"), { etcdClusterVersion: "3.7" }],
      ["unreadable", unread, { etcdClusterVersionError: "etcd /version: no answer within 5000 ms" }],
      [
        "an answer that is no version",
        reads("garbage"),
        { etcdClusterVersionError: 'etcd /version (via n1) answered cluster version "garbage", not a version' },
      ],
      [
        "empty",
        reads(""),
        { etcdClusterVersionError: 'etcd /version (via n1) answered cluster version "", not a version' },
      ],
    ];
    for (const [title, cluster, expected] of table)
      it(title, () => assert.deepEqual(etcdClusterVersionFields(cluster), expected));
  });
});
