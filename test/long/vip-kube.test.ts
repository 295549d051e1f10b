// The VIP mode with Kubernetes on the lab, outside `npm test` (about 5 min on 2 cores):
// kubeadm init and join through the VIP as controlPlaneEndpoint, keepalived tracking each
// node's kube-apiserver /readyz, and a roll to a new base image while an API client writes
// and reads a ConfigMap through the VIP. Run: npm run test:vip-kube (root; lab t10).
import * as assert from "node:assert/strict";
import { join } from "node:path";
import { runCli, summaryOf } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { labKubeConfig, startApiProbe, deployWorkload } from "../support/kube-workload";
import { labStackYaml, testLab } from "../support/lab";

const lab = testLab(10);
const STACK = "vipk";
const VIP = "10.77.110.5";
const yaml = (image: string) =>
  labStackYaml(lab, {
    image,
    replicas: Number(process.env.MOLT_VIP_KUBE_REPLICAS ?? 1),
    joinSeconds: 300,
    settleSeconds: 60,
    drainSeconds: 120,
    apiEndpoint: { mode: "vip", address: VIP },
  });

describe("API endpoint VIP with Kubernetes on the lab (long, lab t10)", function () {
  let suite: CliSuite;
  const figures: Record<string, unknown> = {};
  const rollout = () => runCli(["rollout", "--stack", STACK, "--yes", "--json"], suite.env);

  before(() => {
    suite = cliSuite("molt-vipk-", STACK, lab);
  });
  after(async function () {
    this.timeout(600_000);
    console.log("    vip-kube figures:", JSON.stringify(figures));
    await suite.teardown();
  });

  it(
    "initialises Kubernetes through the VIP (kubeadm init and join with the VIP as " + "controlPlaneEndpoint)",
    async () => {
      suite.wd.writeStackConfig(STACK, yaml("k8s-v1.37.2"));
      const run = await rollout();
      const s = summaryOf(run);
      figures.createWallMs = s.wallMs;
      assert.equal(run.code, 0, `${s.result}: ${s.reason}\n${run.stderr.slice(-2000)}`);
      assert.equal((await suite.stored()).apiEndpoint, `${VIP}:6443`);
    },
  );

  it("rolls to a new base image with an API client through the VIP", async () => {
    const st = await suite.stored();
    const admin = join(lab.labRoot, "labs", lab.lab, "machines", st.nodes[0].name, "root/etc/kubernetes/admin.conf");
    const kc = await labKubeConfig(admin);
    assert.match(kc.getCurrentCluster()?.server ?? "", new RegExp(`https://${VIP.replace(/\./g, "\\.")}:6443`));
    await deployWorkload(kc, { replicas: 1, minAvailable: 0 });
    const probe = await startApiProbe(kc);
    suite.wd.writeStackConfig(STACK, yaml("k8s-v1.37.2-os2"));
    const run = await rollout();
    const stats = await probe.stop();
    const s = summaryOf(run);
    const kinds = run.events
      .filter((e) => e.type === "decision")
      .map((e) => (e.operation as { kind: string; node?: string }).kind);
    figures.roll = { wallMs: s.wallMs, phases: s.phases, operations: kinds.filter((k) => k !== "wait"), api: stats };
    assert.equal(run.code, 0, `${s.result}: ${s.reason}`);
    assert.ok(kinds.indexOf("release-vip") >= 0 && kinds.indexOf("release-vip") < kinds.indexOf("drain"));
    assert.ok(stats.requests > 50, `the API client ran (${stats.requests} requests)`);
    assert.equal(stats.failures, 0, `API requests failed: ${stats.errors.join("; ")}`);
  });
});
