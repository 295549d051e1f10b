// Kubernetes control-plane upgrades end to end on the lab, through the CLI: real kubeadm
// init/join, kube-apiserver behind HAProxy, kube-controller-manager, kube-scheduler and
// stacked etcd on every machine (lab-kubelet runs kubeadm's static pods). A Deployment
// with a PodDisruptionBudget runs on the control-plane nodes and an API client reads and
// writes through the load balancer during every rollout.
import * as assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SshSession } from "../../infra/remote/ssh";
import { sshToStored } from "../support/stored-ssh";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import type { KubeObservation } from "../../orchestrator/core/observations";
import { observeKube, openKube } from "../../orchestrator/observe";
import type { StoredState } from "../../orchestrator/core/nodes";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import {
  deployWorkload,
  labKubeConfig,
  readSecret,
  setPdb,
  startApiProbe,
  waitForReadyPods,
  workloadPods,
  writeSecret,
  type ApiProbeStats,
} from "../support/kube-workload";
import { labLeftovers, labStackYaml, testLab } from "../support/lab";
import { longOnly } from "../support/long";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import type { TestWorkDir } from "../support/workdir";

const lab = testLab(3);
const STACK = "kube";
const V1 = "1.36.3";
const V2 = "1.37.2";
const stackYaml = (image: string, o: { drainSeconds?: number; pruneWithNextSurge?: boolean } = {}) =>
  labStackYaml(lab, {
    image,
    joinSeconds: 240,
    settleSeconds: 60,
    drainSeconds: o.drainSeconds ?? 120,
    ...(o.pruneWithNextSurge ? { pruneWithNextSurge: true } : {}),
    // Secrets encrypted in etcd: the key is made on the first node and carried to every new one.
    encryptionAtRest: true,
  });

/** The first bytes of a key's raw value in etcd, read with etcdctl on the node (never the value itself). */
async function rawPrefix(ssh: SshSession, key: string): Promise<string> {
  const out = await ssh.run(
    "ETCDCTL_API=3 etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt " +
      "--cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt --key=/etc/kubernetes/pki/etcd/healthcheck-client.key " +
      `--command-timeout=5s get ${key} --print-value-only | head -c ${ENCRYPTED.length} | base64 -w0`,
    `reading ${key} raw`,
  );
  return Buffer.from(out.trim(), "base64").toString("latin1");
}

/** How kube-apiserver stores a value encrypted with the aescbc key molt's first node made ("key1"). */
const ENCRYPTED = "k8s:enc:aescbc:v1:key1:";
const SECRET = { name: "molt-encrypted", value: "only-the-api-server-may-read-this" };

interface ClusterView {
  stored: StoredState;
  kube: KubeObservation;
  /** Per node: etcd server version, and the cluster version etcd reports. */
  etcd: { server: Record<string, string>; cluster: string; voters: number; learners: number };
}

describe("Kubernetes upgrades on the lab (e2e)", function () {
  let wd: TestWorkDir;
  let env: Record<string, string>;
  const figures: Record<string, unknown> = {};
  const outputs: string[] = [];
  const adminConf = () => join(wd.dir, "admin.conf");

  let suite: CliSuite;
  const stored = (): Promise<StoredState> => suite.stored();

  const rollout = async (...extra: string[]): Promise<CliRun> => {
    const run = await runCli(["rollout", "--stack", STACK, "--yes", "--json", ...extra], env);
    outputs.push(run.stdout, run.stderr);
    return run;
  };

  /** Everything molt itself would observe, plus etcd's cluster version, independently of the run. */
  async function view(): Promise<ClusterView> {
    const st = await stored();
    const access = await EtcdAccess.open(st.endpoints, { user: st.sshUser, privateKey: st.sshPrivateKey! });
    const kube = await openKube(access);
    try {
      const k = await observeKube(kube, st.nodes);
      const server: Record<string, string> = {};
      for (const n of st.nodes) server[n.name] = (await access.status(n.name)).version;
      const members = await access.memberList(st.nodes[0].name);
      const ssh = access.session(st.nodes[0].name)!;
      const pki = "/etc/kubernetes/pki/etcd";
      const version = JSON.parse(
        await ssh.run(
          `curl -fsS --cacert ${pki}/ca.crt --cert ${pki}/healthcheck-client.crt --key ` +
            `${pki}/healthcheck-client.key https://127.0.0.1:2379/version`,
          "etcd /version",
        ),
      ) as { etcdcluster: string };
      return {
        stored: st,
        kube: k,
        etcd: {
          server,
          cluster: version.etcdcluster,
          voters: members.filter((m) => !m.isLearner).length,
          learners: members.filter((m) => m.isLearner).length,
        },
      };
    } finally {
      await kube.close();
      await access.close();
    }
  }

  async function assertAt(image: string, version: string, etcdMinor: string): Promise<ClusterView> {
    // etcd's leader raises the cluster version on its own, a few seconds after the last member
    // runs the new minor; molt's rollout is done only once it has (plan/cluster-version.ts), so
    // the view, read here independently of molt, shows it at once.
    const v = await view();
    const names = v.stored.nodes.map((n) => n.name).sort();
    assert.equal(names.length, 3, `3 nodes: ${names}`);
    assert.ok(
      v.stored.nodes.every((n) => n.image === image && n.kubernetesVersion === version),
      `every node on ${image}: ${JSON.stringify(v.stored.nodes)}`,
    );
    for (const n of names) {
      const c = v.kube.components[n];
      assert.ok(
        c.apiserver.ok && c.controllerManager.ok && c.scheduler.ok,
        `${n}'s components healthy: ${JSON.stringify(c)}`,
      );
      assert.equal(c.apiserver.version, version, `${n}'s kube-apiserver reports ${version}`);
    }
    const cpNodes = v.kube.nodes.filter((n) => n.controlPlane);
    assert.deepEqual(
      cpNodes.map((n) => n.name).sort(),
      names,
      "the control-plane Node objects are exactly the stack's nodes",
    );
    assert.ok(
      cpNodes.every((n) => n.ready && !n.unschedulable && n.kubeletVersion === version),
      `Nodes Ready, schedulable, at ${version}: ${JSON.stringify(cpNodes)}`,
    );
    assert.equal(v.kube.clusterConfigVersion, version, "kubeadm-config's ClusterConfiguration names the version");
    assert.equal(v.kube.kubeProxy?.version, version, "kube-proxy runs the version");
    assert.equal(v.etcd.voters, 3, "3 voting members");
    assert.equal(v.etcd.learners, 0, "no learner left");
    assert.ok(
      Object.values(v.etcd.server).every((s) => s.startsWith(etcdMinor + ".")),
      `every etcd server is ${etcdMinor}: ${JSON.stringify(v.etcd.server)}`,
    );
    assert.equal(v.etcd.cluster, `${etcdMinor}.0`, "etcd's cluster version");
    const left = labLeftovers(lab);
    assert.deepEqual(
      left.netns.map((n) => n.replace(`molt-${lab.lab}-`, "")).sort(),
      names,
      "no machine of a retired node is left",
    );
    return v;
  }

  const kinds = (run: CliRun) =>
    run.events.filter((e) => e.type === "decision").map((e) => e.operation as { kind: string; node?: string });

  /** Per retired node: drain, then its API server stopped, then its etcd member removed, then pruned. */
  function assertRetirementOrder(run: CliRun, retired: string[]): void {
    const ops = kinds(run);
    for (const n of retired) {
      const at = (kind: string) => ops.findIndex((o) => o.kind === kind && o.node === n);
      // With molt:rollout.pruneWithNextSurge a node is destroyed by the next surge's engine run.
      const pruned = at("prune") >= 0 ? at("prune") : at("prune-and-surge");
      const [drain, stop, remove, prune] = [at("drain"), at("stop-apiserver"), at("remove-member"), pruned];
      assert.ok(
        drain >= 0 && drain < stop && stop < remove && remove < prune,
        `${n}: drain ${drain} < stop-apiserver ${stop} < remove-member ${remove} < prune ${prune}`,
      );
    }
    const counts = run.events.filter((e) => e.type === "observed").map((e) => (e.nodes as unknown[]).length);
    assert.ok(Math.min(...counts) >= 3 && Math.max(...counts) <= 4, `add-first: node counts ${counts}`);
  }

  async function withApiProbe(fn: () => Promise<CliRun>): Promise<{ run: CliRun; api: ApiProbeStats }> {
    const kc = await labKubeConfig(adminConf());
    const probe = await startApiProbe(kc, 100);
    const run = await fn();
    return { run, api: await probe.stop() };
  }

  before(() => {
    suite = cliSuite("molt-kube-", STACK, lab);
    ({ wd, env } = suite);
  });
  after(async function () {
    this.timeout(300_000);
    console.log("    kubernetes figures:", JSON.stringify(figures));
    await suite.teardown();
  });

  it(`creates a 3-node Kubernetes ${V1} control plane with kubeadm (etcd 3.6)`, async () => {
    wd.writeStackConfig(STACK, stackYaml(`k8s-v${V1}`));
    const run = await rollout();
    assert.equal(run.code, 0, run.stderr);
    assert.equal(summaryOf(run).result, "succeeded");
    figures.createWallMs = summaryOf(run).wallMs;
    const v = await assertAt(`k8s-v${V1}`, V1, "3.6");
    // The admin credentials of the new cluster, for the workload and the API client.
    const node = v.stored.endpoints[0];
    const ssh = await sshToStored(v.stored, node);
    writeFileSync(adminConf(), await ssh.run("cat /etc/kubernetes/admin.conf", "admin.conf"), { mode: 0o600 });
    const kc = await labKubeConfig(adminConf());
    // molt:encryptionAtRest: a Secret is stored encrypted with the key the first node made.
    await writeSecret(kc, SECRET.name, SECRET.value);
    assert.equal(await rawPrefix(ssh, `/registry/secrets/default/${SECRET.name}`), ENCRYPTED);
    ssh.close();
    await deployWorkload(kc, { replicas: 3, minAvailable: 2 });
    await waitForReadyPods(kc, 3, 120_000);
  });

  it(
    `upgrades to Kubernetes ${V2} and etcd 3.7 add-first, draining with the PDB honoured, the API answering ` +
      `throughout`,
    async () => {
      wd.writeStackConfig(STACK, stackYaml(`k8s-v${V2}`));
      const before = (await stored()).nodes.map((n) => n.name);
      const { run, api } = await withApiProbe(rollout);
      const s = summaryOf(run);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(s.result, "succeeded");
      figures.upgradeWallMs = s.wallMs;
      figures.upgradePhases = s.phases;
      figures.upgradeApi = {
        requests: api.requests,
        failures: api.failures,
        longestOutageMs: api.longestOutageMs,
        errors: api.errors,
      };
      const ops = kinds(run);
      assert.equal(ops[0].kind, "update-cluster-config", "kubeadm-config names the new version before any node joins");
      assert.ok(
        ops.findIndex((o) => o.kind === "update-addons") > ops.map((o) => o.kind).lastIndexOf("prune"),
        "addons after the last retirement",
      );
      assertRetirementOrder(run, before);
      const after = await assertAt(`k8s-v${V2}`, V2, "3.7");
      const kc = await labKubeConfig(adminConf());
      // Every node is new: each got the encryption key carried from an older one before its join.
      // The Secret written before reads back, is still encrypted, and a new one is encrypted too.
      assert.equal(await readSecret(kc, SECRET.name), SECRET.value);
      await writeSecret(kc, `${SECRET.name}-after`, SECRET.value);
      const node = after.stored.endpoints[after.stored.endpoints.length - 1];
      const ssh = await sshToStored(after.stored, node);
      try {
        for (const name of [SECRET.name, `${SECRET.name}-after`])
          assert.equal(await rawPrefix(ssh, `/registry/secrets/default/${name}`), ENCRYPTED, name);
        const mode = await ssh.run(
          "stat -c '%a %U' /etc/kubernetes/encryption-providers/encryption-providers.yaml",
          "the key file",
        );
        assert.equal(mode.trim(), "600 root", "the carried key keeps its owner and mode");
      } finally {
        ssh.close();
      }
      const pods = await workloadPods(kc);
      assert.equal(pods.filter((p) => p.ready).length, 3, `3 workload pods ready: ${JSON.stringify(pods)}`);
      assert.ok(
        pods.every((p) => !before.includes(p.node)),
        "the workload left the retired nodes",
      );
      assert.ok(api.requests > 500, `the API client really ran (${api.requests} requests)`);
      // The documented window: at most 1 s of failed requests in a row (while the load
      // balancer notices a stopped API server).
      assert.ok(api.longestOutageMs <= 1000, `API unavailable for ${api.longestOutageMs} ms: ${JSON.stringify(api)}`);
    },
  );

  it("refuses a downgrade with exit 2 and changes nothing", async () => {
    const before = await stored();
    wd.writeStackConfig(STACK, stackYaml(`k8s-v${V1}`));
    const run = await rollout();
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const s = summaryOf(run);
    assert.equal(s.result, "refused");
    assert.match(
      s.reason,
      /KubernetesVersionSkew: .*1\.37\.2, newer than the target 1\.36\.3: downgrades are not supported/,
    );
    assert.equal(s.operations, 0);
    assert.deepEqual((await stored()).nodes, before.nodes, "the node list is unchanged");
  });

  // npm run test:long only (test/support/long.ts): CI's time budget.
  longOnly(() => {
    it(
      "stops safely when a PodDisruptionBudget blocks the drain past its deadline, and continues once it allows " +
        "it",
      async () => {
        const kc = await labKubeConfig(adminConf());
        await setPdb(kc, 3); // 3 replicas, minAvailable 3: no eviction is allowed
        // The base-image roll also runs molt:rollout.pruneWithNextSurge (a prune and the next surge in one
        // engine run) with Kubernetes: drains, the API probe and the retirement order hold as without it.
        wd.writeStackConfig(STACK, stackYaml(`k8s-v${V2}-os2`, { drainSeconds: 15, pruneWithNextSurge: true }));
        const before = (await stored()).nodes.map((n) => n.name);
        const blocked = await rollout();
        const s = summaryOf(blocked);
        assert.equal(blocked.code, 7, blocked.stdout + blocked.stderr);
        assert.equal(s.result, "failed");
        assert.match(s.reason, /drain of .* did not finish within 15s .*disruption budget.*No node was removed/);
        const mid = await view();
        assert.equal(mid.stored.nodes.length, 4, "the new node stays, nothing was removed");
        assert.equal(mid.etcd.voters, 4, "every etcd member is in place");
        const victim = before[0];
        assert.ok(mid.kube.nodes.find((n) => n.name === victim)?.unschedulable, `${victim} stays cordoned`);
        assert.equal((await workloadPods(kc)).filter((p) => p.ready).length, 3, "no workload pod was evicted");

        await setPdb(kc, 2);
        const { run, api } = await withApiProbe(rollout);
        assert.equal(run.code, 0, run.stderr);
        assert.equal(kinds(run)[0].kind, "drain", "the next run continues with the drain");
        assertRetirementOrder(run, before);
        figures.baseImageRollWallMs = summaryOf(run).wallMs;
        figures.baseImageRollApi = {
          requests: api.requests,
          failures: api.failures,
          longestOutageMs: api.longestOutageMs,
        };
        assert.ok(api.longestOutageMs <= 1000, `API unavailable for ${api.longestOutageMs} ms`);
        await assertAt(`k8s-v${V2}-os2`, V2, "3.7");
      },
    );
  });

  it("never shows the cluster's keys or a bootstrap token in its output or state in the clear", async () => {
    const st = await stored();
    const node = st.endpoints[0];
    const ssh = await sshToStored(st, node);
    const read = (f: string) => ssh.run(`cat /etc/kubernetes/pki/${f}`, f);
    const keyBody = (pem: string) =>
      pem
        .split("\n")
        .filter((l) => l && !l.startsWith("-----"))
        .join("");
    const secrets: Record<string, string> = {
      "cluster CA key": keyBody(await read("ca.key")),
      "service-account key": keyBody(await read("sa.key")),
      "front-proxy CA key": keyBody(await read("front-proxy-ca.key")),
      "etcd CA key": keyBody(await read("etcd/ca.key")),
      // molt:encryptionAtRest: the key went from node to node over SSH, never through the state.
      "encryption-at-rest key": (
        await ssh.run("cat /etc/kubernetes/encryption-providers/encryption-providers.yaml", "encryption key")
      )
        .split("\n")
        .find((l) => l.trim().startsWith("secret:"))!
        .trim()
        .slice("secret:".length)
        .trim(),
    };
    // Bootstrap tokens molt created for joins (30 min TTL: still there).
    const tokens = (
      await ssh.run(
        "kubeadm token list --kubeconfig /etc/kubernetes/admin.conf | awk 'NR > 1 { print $1 }'",
        "token list",
      )
    )
      .split("\n")
      .filter((t) => /^[a-z0-9]{6}\.[a-z0-9]{16}$/.test(t));
    ssh.close();
    assert.ok(tokens.length >= 2, `bootstrap tokens of the joins found: ${tokens.length}`);
    tokens.forEach((t, i) => (secrets[`bootstrap token ${i}`] = t.split(".")[1]));
    const stateDir = join(wd.dir, "state", ".pulumi", "stacks", "molt");
    const state = readdirSync(stateDir)
      .map((f) => readFileSync(join(stateDir, f), "utf8"))
      .join("\n")
      .replace(/\\n|\s/g, "");
    const haystack = outputs.join("\n");
    for (const [what, body] of Object.entries(secrets)) {
      assert.ok(body.length >= 16, `${what} read`);
      const probe = body.length > 48 ? body.slice(8, 48) : body;
      assert.ok(!haystack.includes(probe), `${what} appears in the CLI's output`);
      assert.ok(!state.includes(probe), `${what} is in the stack state unencrypted`);
    }
  });
});
