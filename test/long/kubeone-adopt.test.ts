// Adopting the KubeOne-faithful cluster (test/support/kubeone-foreign.ts: encryption at rest,
// static audit log, PodNodeSelector admission configuration, PKI copied over SSH, behind a
// bastion) and rolling it to the next lab image: every node molt adds gets the cluster's host
// files before its join (orchestrator/core/host-files.ts), with an API client through the
// cluster's own HAProxy the whole time. Checked from outside afterwards: a Secret written before
// adoption reads back and its raw etcd value is still encrypted with KubeOne's key, each new
// node writes its audit log, no retired server is left in the HAProxy (by address), and the
// retired machines keep neither the CA keys nor the encryption key.
// Lab t27 (the bastion on 10.77.127.0/24; the nodes on an isolated bridge). Not in `npm test`:
// `npx mocha --no-config --timeout 1800000 dist/test/long/kubeone-adopt.test.js` under the lab lock.
import * as assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { LabSettings } from "../../infra/lab/settings";
import { SshSession } from "../../infra/remote/ssh";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import type { StoredState } from "../../orchestrator/core/nodes";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { createKubeOneCluster, KUBEONE_AUDIT_LOG, type KubeOneCluster } from "../support/kubeone-foreign";
import { deployWorkload, labKubeConfig, readSecret, startApiProbe, writeSecret } from "../support/kube-workload";
import { labLeftovers, testLab } from "../support/lab";
import {
  adoptFromTerraform,
  adoptingStackYaml,
  useInstallerAgent,
  writeHostAdminConf,
} from "../support/foreign-adoption";

const publicLab = testLab(27);
const lab: LabSettings = { ...publicLab, bridge: "moltbr-t27p", subnet: "10.77.227.0/24", isolated: true };
const STACK = "ko27";
const NAMES = ["ko27-cp-0", "ko27-cp-1", "ko27-cp-2"];
const SECRET = { name: "before-adoption", value: "written-through-kubeone's-cluster" };

describe("adopting and rolling a KubeOne-made control plane with its host files (scenario)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  let c: KubeOneCluster;
  const figures: Record<string, unknown> = {};
  let restoreAgent: (() => void) | undefined;
  /** A rollout of a stack that adopted nothing would build a cluster of its own beside KubeOne's. */
  let adopted = false;
  const admin = () => join(suite.wd.dir, "admin.conf");

  const stackYaml = (image: string) => adoptingStackYaml(c, lab, image);
  const cli = (...args: string[]): Promise<CliRun> => runCli(args, env);
  const bastion = () => ({
    host: c.bastion!.address,
    user: "root",
    hostKey: c.bastion!.hostKey,
    agent: c.agent.socket,
  });

  /** A command on one of molt's nodes, through the bastion. */
  async function onNode(st: StoredState, name: string, command: string): Promise<string> {
    const e = st.endpoints.find((x) => x.name === name)!;
    const ssh = await SshSession.connect({
      host: e.sshHost,
      port: e.sshPort,
      user: st.sshUser,
      privateKey: st.sshPrivateKey!,
      hostKey: e.hostPublicKey,
      bastion: bastion(),
    });
    try {
      return await ssh.run(command, command);
    } finally {
      ssh.close();
    }
  }

  before(async function () {
    this.timeout(1_200_000);
    suite = cliSuite("molt-kubeone-adopt-", STACK, lab);
    const t0 = Date.now();
    c = await createKubeOneCluster({
      lab,
      bastionLab: publicLab,
      image: "k8s-v1.36.3",
      names: NAMES,
      clusterName: STACK,
      // The lab runs no cloud controller manager and molt's lab nodes no --cloud-provider: a
      // KubeOne cluster without a cloud (its "none" provider). adopt refuses a mismatch.
      externalCloudProvider: false,
    });
    figures.buildMs = Date.now() - t0;
    env = { ...suite.env, SSH_AUTH_SOCK: c.agent.socket };
    restoreAgent = useInstallerAgent(c);
    suite.wd.writeStackConfig(STACK, stackYaml("k8s-v1.36.3"));
    await writeHostAdminConf(c, NAMES[0], admin());
    const kc = await labKubeConfig(admin());
    await writeSecret(kc, SECRET.name, SECRET.value);
    await deployWorkload(kc, { replicas: 3, minAvailable: 2 });
  });

  after(async function () {
    this.timeout(1_200_000);
    console.log("    figures:", JSON.stringify(figures));
    await suite?.teardown();
    await c?.destroy();
    restoreAgent?.();
    for (const l of [lab, publicLab])
      assert.deepEqual(labLeftovers(l), { netns: [], ports: [], machineDirs: [], haproxy: [] });
  });

  it("adopts it from KubeOne's terraform output", async function () {
    this.timeout(300_000);
    const run = await adoptFromTerraform(c, suite.wd.dir, STACK, cli);
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.deepEqual((await suite.stored()).nodes.map((n) => n.name).sort(), NAMES);
    adopted = true;
  });

  it("rolls it to the next image, each new node getting the host files first, no request failing", async function () {
    this.timeout(1_800_000);
    assert.ok(adopted, "the adoption failed (above): not rolling a stack that holds no cluster");
    suite.wd.writeStackConfig(STACK, stackYaml("k8s-v1.37.2"));
    const kc = await labKubeConfig(admin());
    const probe = await startApiProbe(kc, 100);
    const t = Date.now();
    const run = await cli("rollout", "--stack", STACK, "--yes", "--json");
    figures.rolloutMs = Date.now() - t;
    const stats = await probe.stop();
    figures.api = { requests: stats.requests, failures: stats.failures, longestOutageMs: stats.longestOutageMs };
    assert.equal(run.code, 0, run.stdout.split("\n").slice(-40).join("\n"));
    const s = summaryOf(run);
    assert.equal(s.result, "succeeded", s.reason);
    assert.equal(stats.failures, 0, `no failed API request: ${stats.errors.join("; ")}`);
    const surges = run.stdout
      .split("\n")
      .filter((l) => l.includes('"kind":"surge"'))
      .map((l) => JSON.parse(l) as { operation?: { hostFiles?: { files: { path: string }[] } } });
    assert.ok(surges.length >= 3 && surges.every((e) => e.operation?.hostFiles?.files.length), "every surge carried");

    const st = await suite.stored();
    const mine = st.nodes.map((n) => n.name).sort();
    assert.ok(st.nodes.every((n) => !n.adopted));
    // The Secret written before adoption: served by molt's API servers, still encrypted in etcd.
    assert.equal(await readSecret(kc, SECRET.name), SECRET.value);
    const access = await EtcdAccess.open(st.endpoints, {
      user: st.sshUser,
      privateKey: st.sshPrivateKey!,
      agent: c.agent.socket,
      bastion: bastion(),
    });
    try {
      const raw = await access.leaseKv().get(`/registry/secrets/default/${SECRET.name}`);
      assert.ok(raw, "the Secret is in etcd");
      const prefix = raw.value.subarray(0, 64).toString("latin1");
      assert.ok(prefix.startsWith(`k8s:enc:aescbc:v1:${c.encryptionKeyName}:`), `raw value starts ${prefix}`);
      assert.ok(!raw.value.toString("latin1").includes(SECRET.value), "no plaintext in etcd");
    } finally {
      await access.close();
    }
    // The same with etcdctl on one of molt's nodes, against its own etcd member.
    const got = await onNode(
      st,
      mine[0],
      `${st.sshUser === "root" ? "" : "sudo -n "}ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 ` +
        "--cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt " +
        `--key=/etc/kubernetes/pki/etcd/healthcheck-client.key get /registry/secrets/default/${SECRET.name} -w json`,
    );
    const kv = (JSON.parse(got) as { kvs?: { value: string }[] }).kvs?.[0];
    assert.ok(kv, `etcdctl on ${mine[0]} finds the Secret`);
    const etcdctlRaw = Buffer.from(kv.value, "base64").toString("latin1");
    assert.ok(etcdctlRaw.startsWith(`k8s:enc:aescbc:v1:${c.encryptionKeyName}:`), "etcdctl: encrypted at rest");
    figures.etcdctlPrefix = etcdctlRaw.slice(0, `k8s:enc:aescbc:v1:${c.encryptionKeyName}:`.length);
    // Each new API server writes its audit log (KubeOne's policy, carried).
    for (const n of mine) {
      await readSecret(kc, SECRET.name);
      const size = await onNode(st, n, `stat -c %s ${KUBEONE_AUDIT_LOG}`);
      assert.ok(Number(size) > 0, `${n} writes ${KUBEONE_AUDIT_LOG}`);
    }
    // No retired server is left in KubeOne's HAProxy, matched by address.
    const dir = join(c.lb!.inputs.labRoot, "labs", c.lb!.inputs.lab, "lb", "servers");
    const addresses = readdirSync(dir).map((f) => readFileSync(join(dir, f), "utf8").trim().split(":")[0]);
    const ours = st.endpoints.map((e) => e.privateAddress).sort();
    assert.deepEqual(addresses.sort(), ours, "the HAProxy routes to molt's nodes only");
    // The retired machines keep none of the cluster's keys.
    for (const n of NAMES) {
      const left = await c.filesOn(n, ["/etc/kubernetes/pki", "/etc/kubernetes/encryption-providers"]);
      assert.deepEqual(left, [], `${n} keeps no cluster secret`);
    }
    const noop = await cli("rollout", "--stack", STACK, "--yes", "--json");
    assert.equal(summaryOf(noop).result, "noop");
  });
});
