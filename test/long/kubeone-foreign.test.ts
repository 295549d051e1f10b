// The KubeOne-faithful foreign cluster (test/support/kubeone-foreign.ts) on its own: three
// Kubernetes 1.36 control-plane nodes behind a bastion, made the way KubeOne's tasks make
// them (encryption at rest, static audit log, PodNodeSelector admission configuration, PKI
// copied over SSH), and the checks the adoption e2e relies on. Last, the premise of molt's
// file carrying: a plain `kubeadm join --control-plane` of a fresh machine gets a kube-apiserver
// that cannot start, because nothing puts KubeOne's files on it.
// Lab t25 (the bastion on 10.77.125.0/24; the nodes on an isolated bridge). Not in `npm test`:
// `npx mocha --no-config --timeout 1800000 dist/test/long/kubeone-foreign.test.js` under the lab lock.
import * as assert from "node:assert/strict";
import type { LabSettings } from "../../infra/lab/settings";
import {
  createKubeOneCluster,
  KUBEONE_AUDIT_LOG,
  KUBEONE_FILES,
  KUBEONE_WORK_DIR,
  type KubeOneCluster,
} from "../support/kubeone-foreign";
import { labLeftovers, testLab } from "../support/lab";

const publicLab = testLab(25);
// The nodes' isolated bridge: lab t25's too, on a subnet no other lab uses.
const privateLab: LabSettings = { ...publicLab, bridge: "moltbr-t25p", subnet: "10.77.225.0/24" };
const NAMES = ["ko25-cp-0", "ko25-cp-1", "ko25-cp-2"];
const SPARE = "ko25-cp-3";

describe("a KubeOne-made Kubernetes 1.36 control plane behind a bastion (lab t25)", function () {
  let c: KubeOneCluster;
  const built = new Date();

  before(async function () {
    this.timeout(1_200_000);
    const t0 = Date.now();
    c = await createKubeOneCluster({
      lab: privateLab,
      bastionLab: publicLab,
      image: "k8s-v1.36.3",
      names: NAMES,
      clusterName: "ko25",
    });
    console.log(`    built in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });

  after(async function () {
    this.timeout(300_000);
    await c?.destroy();
    assert.deepEqual(labLeftovers(publicLab), { netns: [], ports: [], machineDirs: [], haproxy: [] });
    assert.deepEqual(labLeftovers(privateLab), { netns: [], ports: [], machineDirs: [], haproxy: [] });
  });

  it("has three ready API servers, named after the hosts, all in the LB", async function () {
    this.timeout(60_000);
    for (const n of NAMES) assert.ok(await c.apiServerReady(n), `kube-apiserver on ${n} is not ready`);
    assert.deepEqual(await c.nodeNames(), NAMES);
  });

  it("reads the Secret back through every API server", async function () {
    this.timeout(60_000);
    for (const n of NAMES) assert.deepEqual(await c.readSecret(c.secret.name, n), { ok: true, matches: true }, n);
  });

  it("keeps the Secret encrypted in etcd with KubeOne's aescbc key (etcdctl on every node)", async function () {
    this.timeout(60_000);
    for (const n of NAMES) {
      const raw = await c.secretAtRest(c.secret.name, n);
      assert.equal(raw.prefix, `k8s:enc:aescbc:v1:${c.encryptionKeyName}:`, n);
      assert.equal(raw.plaintextVisible, false, n);
      assert.ok(await c.secretEncryptedAtRest(c.secret.name, n), n);
    }
  });

  it("writes the audit log on every node", async function () {
    this.timeout(60_000);
    for (const n of NAMES) {
      // A read through this node's API server is an audit event in this node's log.
      await c.readSecret(c.secret.name, n);
      assert.ok(await c.auditLogWritten(n, built), `no audit event in ${KUBEONE_AUDIT_LOG} on ${n}`);
    }
  });

  it("enforces the PodNodeSelector admission configuration on every API server", async function () {
    this.timeout(60_000);
    for (const n of NAMES) assert.equal(await c.admissionConfigInEffect(n), true, n);
  });

  it("has KubeOne's files on every control-plane host, root-owned and 0600", async function () {
    this.timeout(60_000);
    for (const n of NAMES) {
      const files = await c.filesOn(n);
      for (const path of [...Object.values(KUBEONE_FILES), KUBEONE_AUDIT_LOG]) {
        const f = files.find((x) => x.path === path);
        assert.ok(f, `${path} missing on ${n}: ${JSON.stringify(files)}`);
        assert.equal(f.owner, "root:root", `${path} on ${n}`);
        assert.equal(f.mode, "600", `${path} on ${n}`);
      }
      assert.ok(files.some((f) => f.path === `${KUBEONE_WORK_DIR}/cfg`));
    }
  });

  it("gives a plain kubeadm join --control-plane a kube-apiserver that cannot start", async function () {
    this.timeout(600_000);
    await c.addMachine(SPARE);
    const spareFiles = (await c.filesOn(SPARE)).filter((f) => f.type === "file");
    assert.deepEqual(spareFiles, [], "the fresh machine has none of KubeOne's files");
    const join = await c.plainControlPlaneJoin(SPARE, 60);
    console.log(`    kubeadm join on ${SPARE}:\n${join.output.replace(/^/gm, "      ")}`);
    assert.equal(join.ok, false, "kubeadm join succeeded without KubeOne's files");
    assert.equal(await c.apiServerReady(SPARE), false);
    const log = await c.apiServerLog(SPARE, 3);
    console.log(`    its kube-apiserver:\n${log.replace(/^/gm, "      ")}`);
    assert.match(log, /encryption-providers\.yaml|audit\/policy\.yaml|admission-config\.yaml/);
    assert.match(log, /no such file or directory/);
    // kubeadm added the machine's etcd member (etcd-join) before it failed: the failed join
    // leaves a fourth voter behind, on a machine whose API server never starts.
    assert.deepEqual(await c.etcdMembers(c.leader), [...NAMES, SPARE].sort());
    // The other API servers still serve the Secret.
    for (const n of NAMES) assert.deepEqual(await c.readSecret(c.secret.name, n), { ok: true, matches: true }, n);
  });
});
