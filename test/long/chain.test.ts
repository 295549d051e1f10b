// A chained upgrade on the lab (t31), issue #34: a 3-node Kubernetes 1.35 control plane
// (kubeadm, etcd 3.6) reaches 1.37 (etcd 3.7) in one rollout through 1.36, one minor per
// step, with an API writer through the load balancer the whole time. molt is SIGKILLed
// between the steps and again inside the second step's engine run; reruns resume at the
// step the world is in and converge. Outside `npm test` (its 1.35 image is built only by
// `npm run test:long`: tools/lab/build-images.sh --chain).
import * as assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { sshToStored } from "../support/stored-ssh";
import { inspect } from "../../orchestrator/inspect";
import { runCli, startCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { deployWorkload, labKubeConfig, startApiProbe, waitForReadyPods } from "../support/kube-workload";
import { labStackYaml, testLab } from "../support/lab";

const lab = testLab(31);
const STACK = "chain";
const FROM = "k8s-v1.35.4";
const IMAGES = { "1.35": FROM, "1.36": "k8s-v1.36.3" };
const TARGET = "k8s-v1.37.2";

describe("a chained upgrade 1.35 -> 1.36 -> 1.37 in one rollout (long, lab t31)", function () {
  let suite: CliSuite;
  const figures: Record<string, unknown> = {};
  const adminConf = () => join(suite.wd.dir, "admin.conf");
  const conf = (image: string, images?: Record<string, string>) => {
    const doc = parse(labStackYaml(lab, { image, joinSeconds: 240, settleSeconds: 60, drainSeconds: 120 })) as {
      config: Record<string, unknown>;
    };
    if (images) doc.config["molt:images"] = images;
    return stringify(doc);
  };

  before(async function () {
    this.timeout(900_000);
    const image = join(lab.labRoot, "images", FROM, "image.json");
    assert.ok(existsSync(image), `${image} is missing: build it with tools/lab/build-images.sh --chain`);
    suite = cliSuite("molt-chain-", STACK, lab);
    suite.wd.writeStackConfig(STACK, conf(FROM));
    const t = Date.now();
    const run = await runCli(["rollout", "--stack", STACK, "--yes", "--json"], suite.env);
    figures.createSeconds = Math.round((Date.now() - t) / 1000);
    assert.equal(run.code, 0, run.stderr + run.stdout.slice(-3000));
    const st = await suite.stored();
    const node = st.endpoints[0];
    const ssh = await sshToStored(st, node);
    writeFileSync(adminConf(), await ssh.run("cat /etc/kubernetes/admin.conf", "admin.conf"), { mode: 0o600 });
    ssh.close();
    const kc = await labKubeConfig(adminConf());
    await deployWorkload(kc, { replicas: 3, minAvailable: 2 });
    await waitForReadyPods(kc, 3, 180_000);
  });
  after(async function () {
    this.timeout(600_000);
    console.log("    chain figures:", JSON.stringify(figures));
    await suite?.teardown();
  });

  it("plan prints the chain: each step's version, image and replacements", async () => {
    suite.wd.writeStackConfig(STACK, conf(TARGET, IMAGES));
    const plan = await runCli(["plan", "--stack", STACK], suite.env);
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(plan.stdout, /chain 1\.35\.4 -> 1\.36\.3 -> 1\.37\.2 \(molt:images\)/);
    assert.match(plan.stdout, /\n {2}2\s+1\.36\.3\s+k8s-v1\.36\.3\s+3\.6\.16\s+0\s+3\s+next\n/);
    assert.match(plan.stdout, /\n {2}3\s+1\.37\.2\s+k8s-v1\.37\.2\s+3\.7\.3\s+0\s+3\s+pending\n/);
    figures.plan = plan.stdout.split("\n").filter((l) => /chain|^ {2}\d/.test(l));
  });

  it("walks the chain with a writer through the endpoint: 0 failed requests; SIGKILLed twice, converged", async () => {
    suite.wd.writeStackConfig(STACK, conf(TARGET, IMAGES));
    const kc = await labKubeConfig(adminConf());
    const probe = await startApiProbe(kc, 100);
    const t0 = Date.now();
    /** When each decision was seen (ms since t0), across the runs. */
    const seen: { ms: number; kind: string; version?: string; node?: string; key?: string; reason: string }[] = [];
    const runs: { killedAt?: string; code: number | null; signal: string | null; seconds: number }[] = [];
    /** One run; `killAt` decides on each decision whether (and after how long) to SIGKILL it. */
    const run = async (killAt?: (d: (typeof seen)[number], all: typeof seen) => number | undefined) => {
      const started = Date.now();
      let killedAt: string | undefined;
      const handle = startCli(["rollout", "--stack", STACK, "--yes", "--json"], suite.env, (e) => {
        if (e.type !== "decision") return;
        const op = e.operation as {
          kind: string;
          version?: string;
          node?: string;
          key?: string;
          entry?: { kubernetesVersion?: string };
        };
        const d = {
          ms: Date.now() - t0,
          kind: op.kind,
          version: op.version ?? op.entry?.kubernetesVersion,
          node: op.node,
          key: op.key,
          reason: String((op as { reason?: string }).reason ?? ""),
        };
        seen.push(d);
        const delay = killedAt === undefined ? killAt?.(d, seen) : undefined;
        if (delay !== undefined) {
          killedAt = `${d.kind} ${d.version ?? d.node ?? ""}`.trim();
          setTimeout(() => handle.kill9(), delay);
        }
      });
      const r: CliRun = await handle.done;
      runs.push({ killedAt, code: r.code, signal: r.signal, seconds: Math.round((Date.now() - started) / 1000) });
      return { r, killedAt };
    };
    // 1. Killed between the steps: every node on 1.36, before its addons (the gate of the step).
    const first = await run((d) => (d.kind === "update-addons" && d.version === "1.36.3" ? 0 : undefined));
    assert.ok(first.killedAt, `the kill point between the steps was reached: ${summaryOrError(first.r)}`);
    assert.equal(first.r.signal, "SIGKILL");
    const between = await inspect({ stack: STACK, workDir: suite.wd.dir, env: suite.env });
    figures.betweenSteps = between.nodes.map((n) => `${n.name}:${n.image}`);
    assert.ok(
      between.nodes.every((n) => n.image === "k8s-v1.36.3"),
      `every node on 1.36: ${figures.betweenSteps}`,
    );
    assert.equal(between.chain?.steps[between.chain.current].kubernetesVersion, "1.37.2");
    figures.clusterVersionBetweenSteps = between.etcdClusterVersion;
    // 2. Killed inside the second step: 2.5 s into the engine run of its second surge.
    const surges137 = (all: typeof seen) => all.filter((x) => x.kind === "surge" && x.version === "1.37.2").length;
    const second = await run((d, all) =>
      d.kind === "surge" && d.version === "1.37.2" && surges137(all) === 2 ? 2500 : undefined,
    );
    assert.ok(second.killedAt, `the kill point inside the second step was reached: ${summaryOrError(second.r)}`);
    assert.equal(second.r.signal, "SIGKILL");
    // 3. Reruns converge.
    let last: CliRun | undefined;
    for (let i = 0; i < 3; i++) {
      last = (await run()).r;
      const result = summaryOf(last).result;
      if (result === "succeeded" || result === "noop") break;
    }
    const wall = Date.now() - t0;
    const api = await probe.stop();
    assert.equal(last!.code, 0, summaryOrError(last!));
    // Per-step figures from the decisions: step 1.36 from the first change to 1.37's kubeadm-config.
    const at = (p: (d: (typeof seen)[number]) => boolean) => seen.find(p)?.ms;
    const start137 = at((d) => d.kind === "update-cluster-config" && d.version === "1.37.2")!;
    figures.wallSeconds = Math.round(wall / 1000);
    figures.step136Seconds = Math.round(start137 / 1000);
    figures.step137Seconds = Math.round((wall - start137) / 1000);
    figures.replacements = {
      "1.36.3": seen.filter((d) => d.kind === "surge" && d.version === "1.36.3").length,
      "1.37.2": seen.filter((d) => d.kind === "surge" && d.version === "1.37.2").length,
    };
    figures.runs = runs;
    // etcd's cluster version (plan/cluster-version.ts): each wait on it, from its first decision to its last.
    const cvWaits = seen.filter((d) => d.key === "etcd-cluster-version");
    figures.clusterVersionWaits = cvWaits.length
      ? {
          decisions: cvWaits.length,
          firstMs: cvWaits[0].ms,
          lastMs: cvWaits[cvWaits.length - 1].ms,
          first: cvWaits[0].reason,
          last: cvWaits[cvWaits.length - 1].reason,
        }
      : "none";
    figures.api = {
      requests: api.requests,
      failures: api.failures,
      longestOutageMs: api.longestOutageMs,
      errors: api.errors,
    };
    assert.equal(api.failures, 0, `API requests failed during the chain: ${JSON.stringify(api)}`);
    assert.ok(api.requests > 100, `the writer ran throughout (${api.requests} requests)`);

    // Order: no 1.37 change before 1.36's addons; no 1.36 change after 1.37's kubeadm-config.
    const addons136 = at((d) => d.kind === "update-addons" && d.version === "1.36.3")!;
    assert.ok(addons136 < start137, "1.36's addons before 1.37's first change");
    assert.ok(
      !seen.some((d) => d.ms > start137 && d.version === "1.36.3" && d.kind !== "update-addons"),
      "no 1.36 change once 1.37 started",
    );

    // Converged on the target: every node a healthy voter on 1.37.2, kubeadm-config and addons on it.
    const i = await inspect({ stack: STACK, workDir: suite.wd.dir, env: suite.env });
    assert.equal(i.next.kind, "done", i.next.reason);
    assert.equal(i.chain, undefined, "no chain left");
    assert.deepEqual(
      i.nodes.map((n) => n.image),
      [TARGET, TARGET, TARGET],
    );
    assert.ok(i.nodes.every((n) => n.member?.healthy && !n.member.learner && n.kube?.healthy));
    assert.ok(i.nodes.every((n) => n.kube?.apiserverVersion?.replace(/^v/, "") === "1.37.2"));
    // molt's run ended only once etcd's leader had raised the cluster version to 3.7.
    figures.clusterVersionAfter = i.etcdClusterVersion;
    assert.equal(i.etcdClusterVersion, "3.7.0", "etcd's cluster version when molt said done");
    const cp = i.conditions.find((c) => c.type === "ControlPlaneHealthy");
    assert.match(cp?.reason ?? "", /kubeadm-config 1\.37\.2/);
    const again = await runCli(["rollout", "--stack", STACK, "--yes", "--json"], suite.env);
    assert.equal(summaryOf(again).result, "noop", summaryOrError(again));
  });
});

function summaryOrError(r: CliRun): string {
  try {
    const s = summaryOf(r);
    return `${s.result}: ${s.reason}`;
  } catch {
    return `exit ${r.code} ${r.signal ?? ""}: ${r.stderr.slice(-1500)}`;
  }
}
