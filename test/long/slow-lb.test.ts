// The endpoint behind a load balancer as slow as a cloud's, outside `npm test` (about 15 min
// on 2 cores): molt:lab.lbHealthCheck makes the lab's HAProxy check every 10 s (3 failures
// down, 2 successes up), keep a 15 s deregistration delay and never retry a refused connection
// elsewhere, as an NLB does. A client writes through it during an etcd roll (etcd-only images;
// the load balancer serves etcd's client port) and a Kubernetes upgrade: no request fails with
// molt's order (deregister, drained, then stop). The same rolls with the order before it
// (MOLT_TEST_RETIRE_WITHOUT_LB=1: stop, then the checks notice) give the contrast figure.
// Run: npm run -s build && flock /tmp/molt-lab.lock npx mocha --no-config --timeout 1800000
// dist/test/long/slow-lb.test.js (root; lab t30).
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { parseSubnet } from "../../infra/lab/host";
import { LB_UNAWARE_ENV } from "../../orchestrator/edges/open";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { deployWorkload, labKubeConfig, startApiProbe } from "../support/kube-workload";
import { labStackYaml, testLab } from "../support/lab";
import { startEtcdEndpointProbe } from "../support/lb-probe";

const lab = testLab(30);
const HEALTH_CHECK = {
  intervalSeconds: 10,
  unhealthyThreshold: 3,
  healthyThreshold: 2,
  deregistrationDelaySeconds: 15,
};
const ENDPOINT = `${parseSubnet(lab.subnet).gateway}:${lab.lbPort}`;

function yaml(image: string, replicas: number): string {
  const doc = parse(labStackYaml(lab, { image, replicas, joinSeconds: 300, settleSeconds: 60, drainSeconds: 120 })) as {
    config: Record<string, Record<string, unknown>>;
  };
  doc.config["molt:lab"] = { ...doc.config["molt:lab"], lbHealthCheck: HEALTH_CHECK };
  return stringify(doc);
}

const operations = (run: CliRun) =>
  run.events
    .filter((e) => e.type === "decision")
    .map((e) => (e.operation as { kind: string; node?: string }).kind)
    .filter((k) => k !== "wait");

/** A file of a lab machine's root, read from the host (as a console would show the disk). */
const machineFile = (node: string, path: string) =>
  readFileSync(join(lab.labRoot, "labs", lab.lab, "machines", node, "root", path), "utf8");

const figures: Record<string, unknown> = { healthCheck: HEALTH_CHECK };

describe("a load balancer as slow as a cloud's (long, lab t30)", function () {
  after(() => console.log("    slow-lb figures:", JSON.stringify(figures)));
  // Both stacks' teardowns ran (nested hooks first): nothing of lab t30 is left running.
  after(() => {
    const machines = execFileSync("ip", ["netns", "list"], { encoding: "utf8" })
      .split("\n")
      .filter((l) => l.startsWith(`molt-${lab.lab}-`));
    assert.deepEqual(machines, [], "lab machines left after the teardown");
    assert.ok(!existsSync(join(lab.labRoot, "labs", lab.lab, "lb", "haproxy.pid")), "the lab's HAProxy is left");
  });

  describe("etcd roll (etcd-only images), an etcd client through the load balancer", () => {
    const STACK = "slowe";
    let suite: CliSuite;
    const rollout = (env: Record<string, string> = {}) =>
      runCli(["rollout", "--stack", STACK, "--yes", "--json"], { ...suite.env, ...env });
    before(() => void (suite = cliSuite("molt-slowe-", STACK, lab)));
    after(async function () {
      this.timeout(600_000);
      await suite.teardown();
    });

    it("creates 3 etcd nodes behind the slow load balancer", async () => {
      suite.wd.writeStackConfig(STACK, yaml("lab-v1", 3));
      const run = await rollout();
      const s = summaryOf(run);
      assert.equal(run.code, 0, `${s.result}: ${s.reason}\n${run.stderr.slice(-2000)}`);
    });

    const roll = async (image: string, env: Record<string, string>) => {
      const st = await suite.stored();
      const pki = "etc/kubernetes/pki/etcd";
      const tls = {
        ca: machineFile(st.nodes[0].name, `${pki}/ca.crt`),
        cert: machineFile(st.nodes[0].name, `${pki}/healthcheck-client.crt`),
        key: machineFile(st.nodes[0].name, `${pki}/healthcheck-client.key`),
      };
      const probe = startEtcdEndpointProbe(ENDPOINT, tls);
      suite.wd.writeStackConfig(STACK, yaml(image, 3));
      const run = await rollout(env);
      const stats = await probe.stop();
      const s = summaryOf(run);
      assert.equal(run.code, 0, `${s.result}: ${s.reason}\n${run.stderr.slice(-2000)}`);
      return { run, stats, s };
    };

    it("rolls to a new image with no failed request (deregister, drained, then the member goes)", async () => {
      const { run, stats, s } = await roll("lab-v2", {});
      const ops = operations(run);
      figures.etcd = { wallMs: s.wallMs, operations: ops, client: stats };
      assert.ok(ops.includes("deregister-target"), ops.join(","));
      assert.ok(ops.indexOf("deregister-target") < ops.indexOf("remove-member"), ops.join(","));
      assert.ok(stats.requests > 100, `the client ran (${stats.requests} requests)`);
      // A leadership move may drop a proposal in flight (etcd's answer, not the load balancer's).
      assert.ok(stats.leaderChanges <= ops.filter((k) => k === "move-leader").length, stats.errors.join("; "));
      assert.equal(stats.failures - stats.leaderChanges, 0, `requests failed: ${stats.errors.join("; ")}`);
    });

    it("contrast: the order before (the member goes, the checks notice) on the same load balancer", async () => {
      const { run, stats, s } = await roll("lab-v1", { [LB_UNAWARE_ENV]: "1" });
      const ops = operations(run);
      figures.etcdOldOrder = { wallMs: s.wallMs, operations: ops, client: stats };
      assert.ok(!ops.includes("deregister-target"), ops.join(","));
      assert.ok(stats.requests > 100, `the client ran (${stats.requests} requests)`);
    });
  });

  describe("Kubernetes upgrade, an API client through the load balancer", () => {
    const STACK = "slowk";
    const REPLICAS = Number(process.env.MOLT_SLOW_LB_KUBE_REPLICAS ?? 1);
    let suite: CliSuite;
    const rollout = (env: Record<string, string> = {}) =>
      runCli(["rollout", "--stack", STACK, "--yes", "--json"], { ...suite.env, ...env });
    before(() => void (suite = cliSuite("molt-slowk-", STACK, lab)));
    after(async function () {
      this.timeout(600_000);
      await suite.teardown();
    });

    it("creates Kubernetes 1.36 behind the slow load balancer", async () => {
      suite.wd.writeStackConfig(STACK, yaml("k8s-v1.36.3", REPLICAS));
      const run = await rollout();
      const s = summaryOf(run);
      assert.equal(run.code, 0, `${s.result}: ${s.reason}\n${run.stderr.slice(-2000)}`);
    });

    const roll = async (image: string, env: Record<string, string>) => {
      const st = await suite.stored();
      const kc = await labKubeConfig(
        join(lab.labRoot, "labs", lab.lab, "machines", st.nodes[0].name, "root/etc/kubernetes/admin.conf"),
      );
      assert.equal(kc.getCurrentCluster()?.server, `https://${ENDPOINT}`);
      await deployWorkload(kc, { replicas: 1, minAvailable: 0 });
      const probe = await startApiProbe(kc);
      suite.wd.writeStackConfig(STACK, yaml(image, REPLICAS));
      const run = await rollout(env);
      const stats = await probe.stop();
      const s = summaryOf(run);
      assert.equal(run.code, 0, `${s.result}: ${s.reason}\n${run.stderr.slice(-2000)}`);
      return { run, stats, s };
    };

    it("upgrades to 1.37 with no failed request (deregister, drained, then the API server stops)", async () => {
      const { run, stats, s } = await roll("k8s-v1.37.2", {});
      const ops = operations(run);
      figures.kube = { wallMs: s.wallMs, operations: ops, client: stats };
      assert.ok(ops.indexOf("deregister-target") >= 0, ops.join(","));
      assert.ok(ops.indexOf("deregister-target") < ops.indexOf("stop-apiserver"), ops.join(","));
      assert.ok(stats.requests > 100, `the client ran (${stats.requests} requests)`);
      assert.equal(stats.failures, 0, `API requests failed: ${stats.errors.join("; ")}`);
    });

    it("contrast: the order before (the API server stops, the checks notice) on the same load balancer", async () => {
      const { run, stats, s } = await roll("k8s-v1.37.2-os2", { [LB_UNAWARE_ENV]: "1" });
      const ops = operations(run);
      figures.kubeOldOrder = { wallMs: s.wallMs, operations: ops, client: stats };
      assert.ok(!ops.includes("deregister-target"), ops.join(","));
      assert.ok(stats.requests > 100, `the client ran (${stats.requests} requests)`);
    });
  });
});
