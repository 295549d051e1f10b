// The one version parser (orchestrator/core/plan/versions.ts) and the rules that read versions
// with it. Before it, versions.ts, chain.ts, etcd-upgrade.ts, cluster-version.ts and
// config/images.ts each parsed on their own and disagreed on " 3.6.16" (a leading space),
// "3.7" (no patch: an etcd cluster version, a minor), "3.7x" and "v1.36.3" (images.ts):
// the rows marked "was:" are those, with what the old parser of that rule gave.
import * as assert from "node:assert/strict";
import {
  compareMinors,
  compareVersions,
  fullVersionOf,
  minorName,
  minorOf,
  versionOf,
  type Version,
} from "../../orchestrator/core/plan/versions";
import { etcdVersionProblem, kubernetesVersionProblem } from "../../orchestrator/core/plan";
import { chainImagesProblems, imageEntries } from "../../orchestrator/config/images";

const show = (v: Version | undefined) =>
  v === undefined ? "-" : [v.major, v.minor, ...(v.patch === undefined ? [] : [v.patch])].join(".");

describe("versions: one parser (plan/versions.ts)", () => {
  describe("versionOf: input -> major.minor[.patch], or - (not a version)", () => {
    const table: [string | undefined, string, string][] = [
      ["1.36.3", "1.36.3", "a Kubernetes version"],
      ["v1.36.3", "1.36.3", "kubeadm's and kubectl's spelling"],
      [" 3.6.16", "3.6.16", "a leading space (was: - in versions.ts and chain.ts, 3.6.16 in etcd-upgrade.ts)"],
      ["3.6.16\n", "3.6.16", "a trailing newline (a file read)"],
      ["\tv3.7.3 ", "3.7.3", "whitespace around a v version"],
      ["3.7", "3.7", "major.minor alone: an etcd cluster version (was: - in versions.ts, chain.ts, etcd-upgrade.ts)"],
      ["v3.7", "3.7", "major.minor with a v"],
      [" 3.7 ", "3.7", "major.minor with whitespace"],
      ["3.7.3+k3s1", "3.7.3", "build metadata ignored"],
      ["v3.8.0-rc.1", "3.8.0", "a pre-release ignored"],
      ["1.2.3.4", "1.2.3", "a fourth number ignored, as every earlier parser did"],
      ["1.36.3abc", "1.36.3", "anything after a full version ignored, as every earlier parser did"],
      ["01.02.03", "1.2.3", "leading zeros"],
      ["", "-", "empty"],
      ["   ", "-", "blank"],
      [undefined, "-", "absent"],
      ["x.y", "-", "not numbers"],
      ["3", "-", "a major alone"],
      ["3.", "-", "a major and a dot"],
      ["v", "-", "a v alone"],
      ["3.7x", "-", "junk after major.minor (was: 3.7 in cluster-version.ts)"],
      ["3.7.x", "-", "a patch that is not a number (was: 3.7 in cluster-version.ts)"],
      ["3.7-rc.1", "-", "a pre-release without a patch (was: 3.7 in cluster-version.ts)"],
      ["vv1.2.3", "-", "a second v"],
      ["V1.2.3", "-", "a capital V"],
      ["-1.2.3", "-", "a sign"],
      ["1 .2.3", "-", "a space inside"],
      ["1.2 .3", "-", "a space before the patch"],
      ["not_decided", "-", "etcd's cluster version before it is decided"],
    ];
    for (const [input, expected, why] of table)
      it(`${JSON.stringify(input)} -> ${expected}: ${why}`, () => assert.equal(show(versionOf(input)), expected));
  });

  it("fullVersionOf: only a version with its patch", () => {
    assert.deepEqual(fullVersionOf(" v1.36.3 "), { major: 1, minor: 36, patch: 3 });
    assert.equal(fullVersionOf("3.7"), undefined);
    assert.equal(fullVersionOf("3.7.x"), undefined);
    assert.equal(fullVersionOf(""), undefined);
  });

  it("minorOf: the minor, without the patch; minorName spells it", () => {
    assert.deepEqual(minorOf("v3.7.3+k3s1"), { major: 3, minor: 7 });
    assert.deepEqual(minorOf("3.7"), { major: 3, minor: 7 });
    assert.equal(minorOf("3.7x"), undefined);
    assert.equal(minorName(versionOf(" 1.36.3")!), "1.36");
  });

  describe("compareVersions and compareMinors", () => {
    const table: [string, string, number, number][] = [
      // a, b, sign of compareVersions, sign of compareMinors
      ["1.36.3", "1.36.3", 0, 0],
      ["1.36.3", "1.36.4", -1, 0],
      ["1.9.0", "1.10.0", -1, -1], // numbers, not strings
      ["2.0.0", "1.99.99", 1, 1],
      ["3.7", "3.7.0", 0, 0], // a missing patch counts as 0
      ["3.7", "3.7.3", -1, 0],
      ["v3.6.16", " 3.6.16", 0, 0],
    ];
    for (const [a, b, full, minor] of table)
      it(`${a} vs ${b}`, () => {
        const [va, vb] = [versionOf(a)!, versionOf(b)!];
        assert.equal(Math.sign(compareVersions(va, vb)), full);
        assert.equal(Math.sign(compareVersions(vb, va)), -full || 0);
        assert.equal(Math.sign(compareMinors(va, vb)), minor);
      });
  });
});

describe("versions: the rules on the inputs the old parsers disagreed on", () => {
  describe("kubernetesVersionProblem (every node at the target or one minor below it)", () => {
    const node = (v: string) => [{ name: "n1", kubernetesVersion: v }];
    const table: [string, string, string, RegExp | undefined][] = [
      ["one minor below", "1.36.3", "1.37.2", undefined],
      ["a v on both", "v1.36.3", "v1.37.2", undefined],
      ["a node's version with a leading space (was: not a version)", " 1.36.3", "1.37.2", undefined],
      ["a target with a trailing newline", "1.36.3", "1.37.2\n", undefined],
      ["a leading space does not hide a skipped minor", " 1.35.4", "1.37.2", /skips a minor version.*1\.36 first/],
      ["a leading space does not hide a downgrade", " 1.38.0", "1.37.2", /newer than the target.*downgrades/],
      [
        "no patch: not a Kubernetes version (as before)",
        "1.36",
        "1.37.2",
        /records Kubernetes version "1\.36", which is not a version/,
      ],
      [
        "a target without a patch (as before)",
        "1.36.3",
        "1.37",
        /the target Kubernetes version "1\.37" is not a version/,
      ],
      ["junk after major.minor (as before)", "1.36x", "1.37.2", /which is not a version/],
      ["an empty node version: not recorded (as before)", "", "1.37.2", undefined],
    ];
    for (const [title, v, target, expected] of table)
      it(title, () => {
        const problem = kubernetesVersionProblem(node(v), target);
        if (expected === undefined) assert.equal(problem, undefined);
        else assert.match(problem ?? "(none)", expected);
      });
  });

  describe("etcdVersionProblem (the members' lowest minor vs the joining member)", () => {
    const table: [string, string[], string, RegExp | undefined][] = [
      ["one minor above the lowest", ["3.6.16", "3.7.3"], "3.7.3", undefined],
      ["two minors above", ["3.5.35"], "3.7.3", /more than one minor above the cluster version 3\.5/],
      ["older than the lowest", ["3.6.16"], "3.5.35", /older than the cluster version 3\.6/],
      [
        "a member's version without a patch (was: ignored, so no refusal)",
        ["3.5"],
        "3.7.3",
        /more than one minor above the cluster version 3\.5/,
      ],
      ["a member's version with a leading space (was: ignored)", [" 3.5.35"], "3.7.3", /more than one minor above/],
      ["a joining version without a patch (was: ignored)", ["3.5.35"], "3.7", /more than one minor above/],
      ["a joining version with a leading space (was: ignored)", ["3.5.35"], " 3.7.3", /more than one minor above/],
      [
        "the lowest minor counts a patchless member (was: 3.7 from 3.7.3 alone)",
        ["3.7.3", "3.6"],
        "3.8.0",
        /above the cluster version 3\.6/,
      ],
      ["an unreadable member is still left out", ["unknown", "3.6.16"], "3.7.3", undefined],
      ["junk after major.minor is still not a version", ["3.5x"], "3.7.3", undefined],
    ];
    for (const [title, members, joining, expected] of table)
      it(title, () => {
        const problem = etcdVersionProblem(members, joining);
        if (expected === undefined) assert.equal(problem, undefined);
        else assert.match(problem ?? "(none)", expected);
      });
  });

  describe("molt:images (config/images.ts) reads its versions with the same parser", () => {
    const target = { image: "k8s-v1.37.2", kubernetesVersion: "1.37.2" };
    const entry = (minor: string, kubernetesVersion: string) => ({
      minor,
      image: `k8s-${kubernetesVersion}`,
      kubernetesVersion,
    });
    it("a v before an entry's version is its minor (was: NaN.36, not a 1.36 version)", () => {
      assert.deepEqual(chainImagesProblems([entry("1.36", "v1.36.3")], target), []);
    });
    it("a v before the target's version (was: every entry above the target)", () => {
      assert.deepEqual(chainImagesProblems([entry("1.36", "1.36.3")], { ...target, kubernetesVersion: "v1.37.2" }), []);
    });
    it("the target's own minor: the same version written with a v is the same (was: a string compare)", () => {
      const same = { minor: "1.37", image: "k8s-v1.37.2", kubernetesVersion: "v1.37.2" };
      assert.deepEqual(chainImagesProblems([same], target), []);
      assert.match(
        chainImagesProblems([{ ...same, kubernetesVersion: "1.37.1" }], target).join("\n"),
        /the target's minor is molt:image/,
      );
    });
    it("an entry of another minor, or above the target, is still named (as before)", () => {
      assert.match(chainImagesProblems([entry("1.36", "1.35.4")], target).join("\n"), /not a 1\.36 version/);
      assert.match(chainImagesProblems([entry("1.38", "1.38.0")], target).join("\n"), /above the target/);
    });
    it("an entry that is not a version is not of its minor", () => {
      assert.match(chainImagesProblems([entry("1.36", "1.36")], target).join("\n"), /not a 1\.36 version/);
    });
    it("entries sort by minor as numbers: 1.9 before 1.10", () => {
      assert.deepEqual(
        imageEntries({ "1.10": "b", "1.9": "a", "2.0": "c" }).map((e) => e.minor),
        ["1.9", "1.10", "2.0"],
      );
    });
  });
});
