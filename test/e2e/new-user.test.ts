// What a new user meets (issue #19), on one lab and a one-node etcd cluster that rolls
// between lab-v1 and lab-v2 (1 -> 2 -> 1): Ctrl-C (SIGINT to the process group) and a CI
// cancel (SIGTERM to molt alone) during a surge and a prune stop at the boundary with
// `cancelled` and exit 130, leave no engine process, and the rerun converges; a second
// signal terminates the engine and says what it leaves; `pulumi preview` by hand shows no
// change after a rollout and a change made out of band; a hand-run `pulumi up` is refused;
// `status` names an unstarted learner; the stack file keeps the user's text.
import * as assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import { hexMemberId } from "../../orchestrator/etcd-id";
import { engineTag } from "../../orchestrator/stack/engine-process";
import { repoRoot } from "../../orchestrator/stack/engine";
import { engineProcessesOf } from "../../orchestrator/stack/leftovers";
import { pollUntil } from "../../lib/poll";
import { runCli, startCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { labStackYaml, testLab } from "../support/lab";

const lab = testLab(14);
const STACK = "nu";
const stackYaml = (image: string) => labStackYaml(lab, { image, replicas: 1, joinSeconds: 120, settleSeconds: 30 });

describe("a new user's rollout: signals, left-overs, hand-run pulumi, status (e2e)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  const figures: Record<string, unknown> = {};
  const rollout = (...extra: string[]) => runCli(["rollout", "--stack", STACK, "--yes", "--json", ...extra], env);
  const image = async () => (await suite.stored()).nodes.map((n) => n.image);
  const other = async () => ((await image())[0] === "lab-v1" ? "lab-v2" : "lab-v1");

  /** Every engine process of the stack is gone (they exit as the engine shuts down). */
  async function noEngineProcessLeft(): Promise<void> {
    const tag = engineTag(env.PULUMI_BACKEND_URL, STACK);
    await pollUntil(() => (engineProcessesOf(tag).length === 0 ? true : undefined), {
      what: "every engine process of the stack to exit",
      deadlineMs: 10_000,
    }).catch(() => {
      throw new Error(`engine processes left: ${JSON.stringify(engineProcessesOf(tag))}`);
    });
  }

  async function converge(target: string): Promise<CliRun> {
    const run = await rollout();
    assert.equal(run.code, 0, `the rerun converges: ${summaryOf(run).result}: ${summaryOf(run).reason}`);
    assert.deepEqual(await image(), [target]);
    return run;
  }

  /**
   * Starts a rollout to the other image and signals it once the engine works on `op`: a
   * surge's join script running (`<node>-etcd`; the issue's case: molt died during `kubeadm
   * join`), a prune's first resource being deleted.
   * The step in flight must finish after the signal (the engine's graceful cancel), not die.
   */
  async function signalDuring(
    op: "surge" | "prune",
    delivery: "group SIGINT" | "molt SIGTERM",
    times = 1,
  ): Promise<CliRun> {
    const target = await other();
    suite.wd.writeStackConfig(STACK, stackYaml(target));
    let inOp = false;
    let sent = 0;
    const t0 = Date.now();
    let signalledAt = 0;
    const signal = () => {
      sent++;
      if (delivery === "group SIGINT") process.kill(-handle.child.pid!, "SIGINT");
      else process.kill(handle.child.pid!, "SIGTERM");
    };
    let inFlight = "";
    /** The engine's dynamic-resource steps, each with the number of signals sent before it came. */
    const steps: { sent: number; resource: string; status: string }[] = [];
    const handle = startCli(["rollout", "--stack", STACK, "--yes", "--json", "--verbose"], env, (e) => {
      if (e.type === "decision") inOp = (e.operation as { kind: string }).kind === op;
      if (e.type !== "resource" || !String(e.kind).startsWith("pulumi-nodejs:dynamic")) return;
      steps.push({ sent, resource: String(e.resource), status: String(e.status) });
      const slow = op === "surge" ? e.op === "create" && /-etcd$/.test(String(e.resource)) : e.op === "delete";
      if (!inOp || e.status !== "started" || !slow || sent > 0) return;
      inFlight = String(e.resource);
      signal();
      signalledAt = Date.now();
    });
    // A second signal only once molt has taken the first (two pending signals are one).
    if (times > 1)
      handle.child.stderr!.on("data", (d: Buffer) => {
        if (sent < times && /stopping at the next boundary/.test(d.toString())) signal();
      });
    const run = await handle.done;
    assert.equal(sent, times, `the ${op} was reached and signalled (exit ${run.code}): ${run.stderr.slice(-500)}`);
    const afterSignal = steps.filter((x) => x.sent > 0);
    figures[`${delivery} during ${op}${times > 1 ? ` x${times}` : ""}`] = {
      inFlight,
      exitAfterSignalMs: Date.now() - signalledAt,
      runMs: Date.now() - t0,
      stepsStartedAfterSignal: afterSignal.filter((x) => x.status === "started").map((x) => x.resource),
    };
    if (times === 1)
      assert.ok(
        afterSignal.some((x) => x.resource === inFlight && x.status === "done"),
        `the step in flight (${inFlight}) finished after the signal: ${JSON.stringify(afterSignal)}`,
      );
    assert.equal(run.signal, null, "molt exited by itself, not killed by the signal");
    assert.equal(run.code, 130, `exit 130; stderr: ${run.stderr.slice(-1000)}`);
    const s = summaryOf(run);
    assert.equal(s.result, "cancelled", s.reason);
    await noEngineProcessLeft();
    return run;
  }

  before(async () => {
    suite = cliSuite("molt-newuser-", STACK, lab);
    env = suite.env;
    suite.wd.writeStackConfig(STACK, stackYaml("lab-v1"));
    const run = await rollout();
    assert.equal(run.code, 0, JSON.stringify(summaryOf(run)));
  });
  after(async () => {
    console.log(`    figures: ${JSON.stringify(figures)}`);
    await suite.teardown();
  });

  it("keeps the stack file as the user wrote it (only Pulumi's salt is added)", () => {
    const text = readFileSync(join(suite.wd.dir, "stacks", `Pulumi.${STACK}.yaml`), "utf8");
    const written = stackYaml("lab-v1");
    assert.ok(text.startsWith(written), `the user's text is untouched:\n${text}`);
    assert.match(text.slice(written.length), /^encryptionsalt: v1:\S+\n$/);
    assert.match(text, /molt:replicas: 1\n/, "a number stays a number");
  });

  it("Ctrl-C (SIGINT to the process group) during a surge: cancelled, exit 130, rerun converges", async () => {
    const target = await other();
    await signalDuring("surge", "group SIGINT");
    await converge(target);
  });

  it("a CI cancel (SIGTERM to molt alone) during a prune: cancelled, exit 130, rerun converges", async () => {
    const target = await other();
    await signalDuring("prune", "molt SIGTERM");
    await converge(target);
  });

  it("SIGTERM to molt alone during a surge: cancelled, exit 130, rerun converges", async () => {
    const target = await other();
    await signalDuring("surge", "molt SIGTERM");
    await converge(target);
  });

  it("Ctrl-C during a prune: cancelled, exit 130, rerun converges", async () => {
    const target = await other();
    await signalDuring("prune", "group SIGINT");
    await converge(target);
  });

  it("a second signal terminates the engine at once, says what it leaves, and the plugins go with it", async () => {
    const target = await other();
    const run = await signalDuring("surge", "molt SIGTERM", 2);
    assert.match(run.stderr, /terminating the engine now .*half done/s, run.stderr);
    assert.match(summaryOf(run).reason, /terminated by a second signal/);
    await converge(target);
  });

  describe("pulumi run by hand (npm run pulumi)", () => {
    const pulumi = async (...args: string[]) => {
      try {
        const r = await promisify(execFile)("bash", [join(repoRoot, "tools", "pulumi.sh"), ...args], {
          env: { ...process.env, ...env },
          maxBuffer: 1 << 24,
        });
        return { code: 0, out: r.stdout + r.stderr };
      } catch (e) {
        const x = e as { code?: number; stdout?: string; stderr?: string };
        return { code: x.code ?? 1, out: `${x.stdout ?? ""}${x.stderr ?? ""}` };
      }
    };
    const project = () => join(suite.wd.dir, "Pulumi.yaml");
    let suiteProject = "";
    before(() => {
      // The suite's project is a copy of molt's: the same program entry (Pulumi.yaml main).
      suiteProject = readFileSync(project(), "utf8");
      symlinkSync(join(repoRoot, "dist"), join(suite.wd.dir, "dist"));
      writeFileSync(project(), readFileSync(join(repoRoot, "Pulumi.yaml"), "utf8"));
    });
    after(() => {
      writeFileSync(project(), suiteProject);
      rmSync(join(suite.wd.dir, "dist"));
    });

    it("`pulumi preview` after a rollout shows no change", async () => {
      const r = await pulumi("preview", "--stack", STACK, "--non-interactive", "--diff");
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, /\d+ unchanged/, r.out);
      assert.doesNotMatch(r.out, /to (create|update|delete|replace)/, r.out);
    });

    it("`pulumi preview --refresh` shows a server taken out of the load balancer by hand", async () => {
      const node = (await suite.stored()).nodes[0].name;
      const server = join(lab.labRoot, "labs", lab.lab, "lb", "servers", node);
      const target = readFileSync(server, "utf8");
      rmSync(server);
      try {
        const r = await pulumi("preview", "--refresh", "--stack", STACK, "--non-interactive");
        assert.equal(r.code, 0, r.out);
        assert.match(r.out, /LabLbAttachment/, r.out);
        assert.match(r.out, /1 to create/, r.out);
      } finally {
        writeFileSync(server, target);
      }
      const again = await pulumi("preview", "--refresh", "--stack", STACK, "--non-interactive");
      assert.doesNotMatch(again.out, /to (create|update|delete|replace)/, again.out);
    });

    it("refuses a hand-run `pulumi up`, pointing to molt rollout, and changes nothing", async () => {
      const before = (await suite.stored()).nodes;
      // Every resource of the nodes as the state holds it, secrets decrypted (a checkpoint
      // written again encrypts them with new nonces), the stack's own record aside.
      const state = async () =>
        (
          JSON.parse((await pulumi("stack", "export", "--show-secrets", "--stack", STACK)).out) as {
            deployment: { resources: { urn: string; type: string; inputs: unknown; outputs: unknown }[] };
          }
        ).deployment.resources
          .filter((x) => x.type !== "pulumi:pulumi:Stack")
          .map((x) => ({ urn: x.urn, inputs: x.inputs, outputs: x.outputs }));
      const stateBefore = await state();
      const r = await pulumi("up", "--yes", "--stack", STACK, "--non-interactive");
      assert.notEqual(r.code, 0, r.out);
      assert.match(r.out, /`pulumi up` by hand is refused, and nothing was changed/, r.out);
      assert.match(r.out, /npm run rollout -- --stack nu/, r.out);
      assert.deepEqual((await suite.stored()).nodes, before);
      assert.deepEqual(await state(), stateBefore, "the state's resources are as they were");
      const preview = await pulumi("preview", "--stack", STACK, "--non-interactive");
      assert.doesNotMatch(preview.out, /to (create|update|delete|replace)/, preview.out);
    });
  });

  it("status names an unstarted learner (not a voter) with its hex ID, and the rollout removes it", async () => {
    const st = await suite.stored();
    const access = await EtcdAccess.open(st.endpoints, { user: st.sshUser, privateKey: st.sshPrivateKey! });
    let id: string;
    try {
      const added = await access
        .endpoint(access.nodes()[0])
        .cluster.memberAdd({ peerURLs: [`https://${lab.subnet.replace(/0\/24$/, "250")}:2380`], isLearner: true });
      id = String(added.member.ID);
    } finally {
      await access.close();
    }
    const human = await runCli(["status", "--stack", STACK], env);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /EtcdClusterHealthy\s+False\s+1 voting member\(s\); member\(s\) not at rest: /);
    assert.ok(human.stdout.includes(`${hexMemberId(id)} (learner, unstarted, no node)`), human.stdout);
    assert.ok(human.stdout.includes(`stray member ${hexMemberId(id)} (unstarted) learner`), human.stdout);
    assert.ok(!human.stdout.includes(id), "no decimal member ID in human output");
    const run = await rollout();
    assert.equal(run.code, 0, summaryOf(run).reason);
    assert.ok(
      run.events.some((e) => e.type === "decision" && (e.operation as { kind: string }).kind === "remove-stray-member"),
    );
    const after = await runCli(["status", "--stack", STACK], env);
    assert.match(after.stdout, /EtcdClusterHealthy\s+True\s+1 voting members/);
  });
});
