// Two stacks on one lab (issue 33), on lab t26 with etcd-only images: stack A is created and
// claims the lab; `pulumi preview` by hand right after shows no change; stack B, pointed at
// the same molt:lab.name (in A's backend, and as A's name in another backend), is refused
// with exit 2, the owner named, and nothing changed; a stack that shared the lab before labs
// had owners (B, made while the lab was unclaimed) is destroyed and A's HAProxy keeps
// running, with A's servers, and A's next rollout attaches a new node to it.
import * as assert from "node:assert/strict";
import { execFile } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { ownerFile, readLabClaim } from "../../infra/lab/owner";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { openStack } from "../../orchestrator/stack/driver";
import { repoRoot } from "../../orchestrator/stack/engine";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { closeFingerprints, fingerprint, type Fingerprint } from "../support/fingerprint";
import { labLeftovers, labStackYaml, testLab } from "../support/lab";

const lab = testLab(26);
const A = "own-a";
const B = "own-b";

describe("two stacks on one lab (e2e, lab t26)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  let endpoints: NodeEndpoint[] = [];
  let key = "";
  const figures: Record<string, number> = {};
  const outputs: string[] = [];
  const lbDir = join(lab.labRoot, "labs", lab.lab, "lb");
  const servers = () => (existsSync(join(lbDir, "servers")) ? readdirSync(join(lbDir, "servers")).sort() : []);
  const haproxyPid = () => Number(readFileSync(join(lbDir, "haproxy.pid"), "utf8").trim().split("\n")[0]);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  const cli = async (args: string[], e: Record<string, string> = env): Promise<CliRun> => {
    const t = Date.now();
    const run = await runCli(args, e);
    figures[`${Object.keys(figures).length + 1}. ${args.slice(0, 3).join(" ")} (exit ${run.code})`] = Date.now() - t;
    outputs.push(run.stdout, run.stderr);
    return run;
  };
  const rollout = (stack: string, e?: Record<string, string>) =>
    cli(["rollout", "--stack", stack, "--yes", "--json"], e);
  const errorOf = (run: CliRun) => run.events.find((x) => x.type === "error") as { error: string; message: string };
  const fp = (): Promise<Fingerprint> =>
    fingerprint({ stateDir: join(suite.wd.dir, "state"), lab, endpoints, sshPrivateKey: key });
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

  before(function () {
    suite = cliSuite("molt-e2e-owner-", A, lab);
    env = suite.env;
    suite.wd.writeStackConfig(A, labStackYaml(lab, { image: "lab-v1", replicas: 3, joinSeconds: 120 }));
    suite.wd.writeStackConfig(B, labStackYaml(lab, { image: "lab-v1", replicas: 1, joinSeconds: 120 }));
    // `npm run pulumi` runs molt's program (Pulumi.yaml main) in the suite's project.
    symlinkSync(join(repoRoot, "dist"), join(suite.wd.dir, "dist"));
    writeFileSync(join(suite.wd.dir, "Pulumi.yaml"), readFileSync(join(repoRoot, "Pulumi.yaml"), "utf8"));
  });

  after(async function () {
    if (!suite) return;
    await closeFingerprints();
    // B first (if a test left it), then A: A's destroy stops the HAProxy and releases the lab.
    for (const stack of [B, A]) {
      try {
        const s = await openStack({
          stackName: stack,
          workDir: suite.wd.dir,
          env,
          create: false,
          program: async () => ({}),
        });
        await s.destroy();
      } catch (e) {
        console.log(`    cleanup ${stack}:`, (e as Error).message.split("\n")[0]);
      }
    }
    const left = labLeftovers(lab);
    if (this.currentTest?.state === "failed") for (const o of outputs.slice(-6)) console.log(o.slice(-3000));
    console.log("    figures (ms):", JSON.stringify(figures));
    suite.wd.cleanup();
    assert.deepEqual(left, { netns: [], ports: [], machineDirs: [], haproxy: [] }, "A's destroy leaves nothing");
    assert.equal(existsSync(ownerFile(lab.labRoot, lab.lab)), false, "and gives the lab up");
  });

  it("stack A is created and claims the lab for itself and its backend", async () => {
    const run = await rollout(A);
    assert.equal(run.code, 0, `${summaryOf(run).result}: ${summaryOf(run).reason}`);
    const claim = readLabClaim(lab.labRoot, lab.lab);
    assert.equal(claim?.stack, A);
    assert.equal(claim?.backend, env.PULUMI_BACKEND_URL);
    const st = await suite.stored();
    endpoints = st.endpoints;
    key = st.sshPrivateKey!;
    assert.deepEqual(servers(), ["own-a-cp-1", "own-a-cp-2", "own-a-cp-3"]);
  });

  it("`pulumi preview` by hand right after shows no change (the last join is registered as stored)", async () => {
    const r = await pulumi("preview", "--stack", A, "--non-interactive", "--diff");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /\d+ unchanged/, r.out);
    assert.doesNotMatch(r.out, /to (create|update|delete|replace)/, r.out);
  });

  it("stack B on the same lab is refused: exit 2, the owner named and how to release it, nothing changed", async () => {
    const before = await fp();
    const pid = haproxyPid();
    const run = await rollout(B);
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const err = errorOf(run);
    assert.equal(err.error, "LabOwnedError");
    assert.match(err.message, new RegExp(`^lab ${lab.lab} belongs to stack ${A} \\(backend file://`));
    assert.match(err.message, new RegExp(`stack ${B} may not use it, and nothing was changed`));
    assert.match(
      err.message,
      new RegExp(`destroy stack ${A} \\(PULUMI_BACKEND_URL=file://.* npm run pulumi -- destroy`),
    );
    assert.deepEqual(await fp(), before, "nothing changed: state, locks, machines, ports, members");
    assert.equal(haproxyPid(), pid);
    assert.equal(readLabClaim(lab.labRoot, lab.lab)?.stack, A);
  });

  it("stack A's name in another backend is refused too", async () => {
    const other = join(suite.wd.dir, "other-state");
    mkdirSync(other);
    suite.wd.writeStackConfig(A, labStackYaml(lab, { image: "lab-v1", replicas: 3, joinSeconds: 120 }));
    const before = await fp();
    const run = await rollout(A, { ...env, PULUMI_BACKEND_URL: `file://${other}` });
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(errorOf(run).message, new RegExp(`stack ${A} \\(backend file://${other}\\) may not use it`));
    assert.deepEqual(await fp(), before);
    assert.ok(!existsSync(join(other, ".pulumi")), "no stack was made in the other backend");
  });

  it("a destroy of a stack that shared the lab before labs had owners leaves A's load balancer running", async () => {
    // B as an older molt made it: created while nobody had claimed the lab, on A's HAProxy.
    const claim = ownerFile(lab.labRoot, lab.lab);
    renameSync(claim, `${claim}.a`);
    try {
      const run = await rollout(B);
      assert.equal(run.code, 0, `${summaryOf(run).result}: ${summaryOf(run).reason}`);
      assert.deepEqual(servers(), ["own-a-cp-1", "own-a-cp-2", "own-a-cp-3", "own-b-cp-1"]);
    } finally {
      renameSync(`${claim}.a`, claim); // A's claim again, as A's first run after the upgrade makes it
    }
    const pid = haproxyPid();
    const t = Date.now();
    const b = await openStack({ stackName: B, workDir: suite.wd.dir, env, create: false, program: async () => ({}) });
    await b.destroy();
    figures[`${Object.keys(figures).length + 1}. destroy ${B}`] = Date.now() - t;
    assert.ok(alive(pid), "A's HAProxy still runs");
    assert.equal(haproxyPid(), pid);
    assert.deepEqual(servers(), ["own-a-cp-1", "own-a-cp-2", "own-a-cp-3"], "A's servers stay, B's went");
    assert.equal(readLabClaim(lab.labRoot, lab.lab)?.stack, A);
    assert.ok(!labLeftovers(lab).netns.some((n) => n.includes(B)), "B's machine is gone");
  });

  it("A's next rollout attaches its new node to the same load balancer", async () => {
    const pid = haproxyPid();
    suite.wd.writeStackConfig(A, labStackYaml(lab, { image: "lab-v2", replicas: 3, joinSeconds: 120 }));
    const run = await cli(["rollout", "--stack", A, "--yes", "--json", "--max-replacements", "1"]);
    assert.equal(run.code, 5, `${summaryOf(run).result}: ${summaryOf(run).reason}`);
    assert.deepEqual(summaryOf(run).replaced, ["own-a-cp-1"]);
    assert.deepEqual(servers(), ["own-a-cp-2", "own-a-cp-3", "own-a-cp-4"]);
    assert.equal(haproxyPid(), pid, "the same HAProxy, reloaded");
    rmSync(join(suite.wd.dir, "other-state"), { recursive: true, force: true });
  });
});
