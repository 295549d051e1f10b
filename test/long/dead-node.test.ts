// A machine that dies outright (every process of its namespaces killed, like a VM that is
// powered off or a host that burned) is replaced with `--replace-dead`: its member is
// removed remove-first, its teardown (reset over SSH) is skipped because it does not
// answer, its machine and LB attachment are destroyed, and a replacement joins. Issue #16.
import * as assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { netnsName } from "../../infra/lab/host";
import { inspect } from "../../orchestrator/inspect";
import { openStack } from "../../orchestrator/stack/driver";
import { runCli, summaryOf } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { labEndpoints } from "../support/probe";
import { killLabMachine, labLeftovers, labStackYaml, testLab } from "../support/lab";

const lab = testLab(10);
const STACK = "dead";

describe("a dead machine is replaced with --replace-dead (e2e, lab t10)", function () {
  let suite: CliSuite;
  const figures: Record<string, unknown> = {};
  const rollout = (...extra: string[]) => runCli(["rollout", "--stack", STACK, "--yes", "--json", ...extra], suite.env);

  before(async function () {
    this.timeout(300_000);
    suite = cliSuite("molt-dead-", STACK, lab);
    suite.wd.writeStackConfig(
      STACK,
      labStackYaml(lab, { image: "lab-v1", replicas: 3, joinSeconds: 120, settleSeconds: 5 }),
    );
    const run = await rollout();
    assert.equal(run.code, 0, run.stderr + run.stdout.slice(-2000));
    figures.createWallMs = summaryOf(run).wallMs;
  });
  after(async function () {
    this.timeout(300_000);
    console.log("    dead-node figures:", JSON.stringify(figures));
    await suite.teardown();
  });

  it("destroys the dead machine without its reset, removes its member and LB entry, and converges", async () => {
    const before = await suite.stored();
    const victim = before.nodes[0].name;
    const victimAddress = before.endpoints.find((e) => e.name === victim)!.privateAddress;
    assert.ok(killLabMachine(lab, victim) > 0, "the machine had processes to kill");

    // Without the declaration molt stops and names the way out; nothing is changed.
    const refused = await rollout();
    const r = summaryOf(refused);
    assert.equal(refused.code, 2, `${r.result}: ${r.reason}`);
    assert.match(r.reason, new RegExp(`${victim}.*--replace-dead ${victim}`));

    const t0 = Date.now();
    const run = await rollout("--replace-dead", victim);
    const s = summaryOf(run);
    figures.replaceDeadWallMs = Date.now() - t0;
    assert.equal(run.code, 0, `${s.result}: ${s.reason}\n${run.stderr.slice(-2000)}`);
    assert.equal(s.result, "succeeded");

    const decisions = run.events
      .filter((e) => e.type === "decision")
      .map((e) => e.operation as { kind: string; node?: string; reason?: string });
    assert.deepEqual(
      decisions.filter((d) => d.node === victim && d.kind !== "wait").map((d) => d.kind),
      ["remove-member", "prune"],
      "remove-first: the member, then the machine",
    );
    assert.match(
      decisions.find((d) => d.kind === "prune")?.reason ?? "",
      /does not answer over SSH.*no reset/,
      "the prune knows the node is dead, and destroys it without a reset (as every pruned machine)",
    );
    const prune = run.events.find((e) => e.type === "phase" && e.operation === "prune" && e.node === victim);
    figures.pruneUpMs = prune?.ms;
    assert.ok(prune && (prune.ms as number) < 60_000, `the prune finished well inside the 120 s connect deadline`);
    // No teardown was attempted (no connection, no second look): nothing to warn about.
    const warnings = run.events.filter((e) => e.type === "warning");
    figures.warnings = warnings.map((w) => w.message);
    assert.ok(
      !warnings.some((w) => w.node === victim && /teardown/.test(String(w.message))),
      `no teardown was tried: ${JSON.stringify(warnings)}`,
    );

    // Converged: three healthy voters, none of them the victim, members == nodes.
    const i = await inspect({ stack: STACK, workDir: suite.wd.dir, env: suite.env });
    assert.equal(i.next.kind, "done", i.next.reason);
    assert.equal(i.nodes.length, 3);
    assert.ok(!i.nodes.some((n) => n.name === victim));
    assert.ok(i.nodes.every((n) => n.member?.healthy && !n.member.learner));
    assert.deepEqual(i.members.map((m) => m.name).sort(), i.nodes.map((n) => n.name).sort());
    assert.ok(
      !i.members.some((m) => m.peerURLs.some((u) => u.includes(`//${victimAddress}:`) && m.name === "")),
      "no unstarted member on the victim's address",
    );

    // Nothing of it left: state, machine, namespace, address, LB entry.
    const stack = await openStack({
      stackName: STACK,
      workDir: suite.wd.dir,
      env: suite.env,
      create: false,
      program: async () => ({}),
    });
    const resources = ((await stack.exportStack()).deployment?.resources ?? []) as { urn: string }[];
    assert.deepEqual(
      resources.filter((x) => x.urn.split("::").pop()!.startsWith(victim)).map((x) => x.urn),
      [],
      "no resource of the dead node in the state",
    );
    assert.ok(!labEndpoints(lab).some((e) => e.name === victim), "its machine is gone");
    assert.ok(!labLeftovers(lab).netns.includes(netnsName(lab.lab, victim)), "its namespace is gone");
    const lbDir = join(lab.labRoot, "labs", lab.lab, "lb");
    assert.ok(!existsSync(join(lbDir, "servers", victim)), "its LB attachment is gone");
    assert.ok(!readFileSync(join(lbDir, "haproxy.cfg"), "utf8").includes(victim), "HAProxy no longer lists it");
    const addresses = readdirSync(join(lab.labRoot, "labs", lab.lab, "addresses")).map((a) =>
      readFileSync(join(lab.labRoot, "labs", lab.lab, "addresses", a), "utf8").trim(),
    );
    assert.ok(!addresses.includes(victim), "its address was released");
  });
});
