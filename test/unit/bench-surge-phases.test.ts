// The bench's surge breakdown (bench/surge-phases.ts) reads kubeadm's klog lines and
// lab-kubelet's log as they are written on a lab machine, in local time.
import * as assert from "node:assert/strict";
import { etcdMarks, klogMarks, kubeletMarks, surgePhases } from "../../bench/surge-phases";

const KUBEADM = [
  "I1203 17:15:22.951022   25639 join.go:423] [preflight] found NodeName empty; using OS hostname as NodeName",
  '[certs] Generating "apiserver" certificate and key',
  "I1203 17:15:26.055238   25639 manifests.go:178] [control-plane] wrote static Pod manifest for component " +
    '"kube-scheduler" to "/etc/kubernetes/manifests/kube-scheduler.yaml"',
  "I1203 17:15:26.088513   25639 kubelet.go:146] [kubelet-start] writing bootstrap kubelet config file at " +
    "/etc/kubernetes/bootstrap-kubelet.conf",
  'I1203 17:15:26.118580   25639 etcd.go:496] [etcd] Adding etcd member "https://10.77.103.11:2380" as learner',
  "I1203 17:15:27.158121   25639 etcd.go:667] [etcd] The learner was promoted as a voting member: 16d40a53d8918b10",
  "[kubelet-start] Waiting for the kubelet to perform the TLS Bootstrap",
].join("\n");
const KUBELET = [
  "2026/12/03 17:15:19.172994 connect to the API server: neither /etc/kubernetes/kubelet.conf nor " +
    "/etc/kubernetes/bootstrap-kubelet.conf exists yet (retrying in 200ms)",
  "2026/12/03 17:15:36.448962 connect to the API server: TLS bootstrap: cannot create certificate signing " +
    "request: Unauthorized (retrying in 6.4s)",
  "2026/12/03 17:15:42.884214 TLS bootstrap: certificate csr-zn7jl issued; writing /etc/kubernetes/kubelet.conf",
  "2026/12/03 17:15:42.904789 node agent: registered Node kube-cp-2",
].join("\n");
const at = (t: string) => new Date(`2026-12-03T${t}`).getTime();

const line = (level: string, ts: string, msg: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ level, ts: `2026-12-03T${ts}Z`, caller: "etcdserver/server.go:1", msg, ...extra });
const PUBLISH_FAILED = "failed to publish local member to cluster through raft";
const ETCD = [
  line("info", "17:15:26.300100", "starting an etcd server", { "etcd-version": "3.7.3" }),
  line("info", "17:15:26.350000", "raft.node: ec22 elected leader bdae at term 2", { logger: "raft" }),
  line("info", "17:15:26.400000", "received and saved database snapshot", { "incoming-snapshot-index": 6007 }),
  line("info", "17:15:26.420000", "applied snapshot", { "current-snapshot-index": 6007 }),
  "not json",
  line("warn", "17:15:33.300200", PUBLISH_FAILED, { "publish-timeout": "7s", error: "etcdserver: request timed out" }),
  line("info", "17:15:33.310000", "published local member to cluster through raft"),
  line("warn", "17:16:33.310000", PUBLISH_FAILED, { error: "later" }),
].join("\n");

describe("bench surge phases", () => {
  it("reads the new etcd member's leader, snapshot and publish tries from its JSON log (UTC)", () => {
    const u = (t: string) => Date.parse(`2026-12-03T${t}Z`);
    assert.deepEqual(etcdMarks(ETCD), {
      started: u("17:15:26.300"),
      leaderKnown: u("17:15:26.350"),
      snapshotReceived: u("17:15:26.400"),
      snapshotIndex: 6007,
      snapshotApplied: u("17:15:26.420"),
      publishFailed: u("17:15:33.300"),
      publishError: "etcdserver: request timed out",
      publishFailures: 1,
      published: u("17:15:33.310"),
    });
    const learnerAdded = u("17:15:26.118");
    const p = surgePhases("n", { learnerAdded, etcd: etcdMarks(ETCD) }, undefined, undefined, {});
    assert.equal(p.etcd?.published, 7192);
    assert.equal(p.etcd?.publishFailed, 7182);
    assert.equal(p.etcd?.publishFailures, 1);
    assert.equal(surgePhases("n", { learnerAdded, etcd: {} }, undefined, undefined, {}).etcd, undefined);
  });

  it("reads kubeadm's steps from its klog lines, in local time", () => {
    assert.deepEqual(klogMarks(KUBEADM, 2026), {
      kubeadmStart: at("17:15:22.951"),
      manifests: at("17:15:26.055"),
      kubeletBootstrapConf: at("17:15:26.088"),
      learnerAdded: at("17:15:26.118"),
      promoted: at("17:15:27.158"),
    });
  });

  it("reads lab-kubelet's boot, certificate and Node registration", () => {
    assert.deepEqual(kubeletMarks(KUBELET), {
      booted: at("17:15:19.172"),
      kubeletCert: at("17:15:42.884"),
      nodeRegistered: at("17:15:42.904"),
    });
  });

  it("splits a surge into consecutive phases that add up to its `up`", () => {
    const marks = {
      machineCreated: at("17:15:18.845"),
      ...kubeletMarks(KUBELET),
      ...klogMarks(KUBEADM, 2026),
      kubeadmEnd: at("17:15:43.749"),
    };
    const p = surgePhases("kube-cp-2", marks, at("17:15:17.000"), at("17:15:44.500"), {
      apiReady: at("17:15:38.000"),
    });
    assert.equal(p.kubeletBootstrap, 15_726);
    assert.equal(p.catchUpAndPromote, 1040);
    const parts = [
      p.engineToMachine,
      p.boot,
      p.attachAndMaterial,
      p.kubeadmPrepare,
      p.toLearner,
      p.catchUpAndPromote,
      p.kubeletBootstrap,
      p.kubeadmRest,
      p.upEnd,
    ];
    assert.equal(
      parts.reduce((a, b) => a! + b!, 0),
      p.upMs,
    );
    assert.equal(p.apiReadyVsUpEnd, -6500);
    assert.equal(p.apiReadyVsKubeletCert, -4884);
  });

  it("leaves a phase out when a log lacks its line, never guesses it", () => {
    const p = surgePhases("n", { booted: 1000 }, 0, 5000, {});
    assert.equal(p.boot, undefined);
    assert.equal(p.upMs, 5000);
  });
});
