// Adopting a foreign Kubernetes control plane made like KubeOne makes one (kubeadm init
// --upload-certs on the first node, join --control-plane on the others, its own HAProxy),
// from its KubeOne-shaped `terraform output -json`, then rolling it to the next lab image
// (Kubernetes 1.36.3 -> 1.37.2, etcd 3.6.16 -> 3.7.3) with a PodDisruptionBudget-guarded
// workload and an API client through the cluster's load balancer the whole time.
// Not part of `npm test` (about 10 min on 2 cores): `npm run test:long`, or this file alone with
// `npx mocha --no-config --timeout 1800000 dist/test/long/adopt-kube.test.js`.
// MOLT_ADOPT_BASTION=1 puts the nodes on an isolated bridge behind a bastion (labs t17/t18);
// otherwise they sit directly on lab t16's bridge.
import * as assert from "node:assert/strict";
import { join } from "node:path";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import type { StoredState } from "../../orchestrator/core/nodes";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { createForeignCluster, lbServers, type ForeignCluster } from "../support/foreign";
import { deployWorkload, labKubeConfig, startApiProbe } from "../support/kube-workload";
import { labLeftovers, testLab } from "../support/lab";
import {
  adoptFromTerraform,
  adoptingStackYaml,
  useInstallerAgent,
  writeHostAdminConf,
} from "../support/foreign-adoption";

const viaBastion = process.env.MOLT_ADOPT_BASTION === "1";
const publicLab = testLab(17);
const lab = viaBastion ? { ...testLab(18), isolated: true as const } : testLab(16);
const STACK = "k1";
const NAMES = ["k1-master-0", "k1-master-1", "k1-master-2"];

describe(
  `adopting a KubeOne-made Kubernetes control plane${viaBastion ? " behind a bastion" : ""} ` + `(scenario)`,
  function () {
    let suite: CliSuite;
    let env: Record<string, string>;
    let foreign: ForeignCluster;
    const figures: Record<string, unknown> = {};
    let restoreAgent: (() => void) | undefined;

    const stackYaml = (image: string) => adoptingStackYaml(foreign, lab, image);
    const cli = (...args: string[]): Promise<CliRun> => runCli(args, env);

    async function members(st: StoredState): Promise<string[]> {
      const eps: NodeEndpoint[] = st.endpoints;
      const access = await EtcdAccess.open(eps, {
        user: "root",
        privateKey: st.sshPrivateKey!,
        agent: foreign.agent.socket,
        ...(foreign.bastion
          ? {
              bastion: {
                host: foreign.bastion.address,
                user: "root",
                hostKey: foreign.bastion.hostKey,
                agent: foreign.agent.socket,
              },
            }
          : {}),
      });
      try {
        return (await access.memberList(st.nodes[0].name)).map((m) => m.name).sort();
      } finally {
        await access.close();
      }
    }

    before(async function () {
      this.timeout(1_200_000);
      suite = cliSuite("molt-adopt-kube-", STACK, lab);
      const t0 = Date.now();
      foreign = await createForeignCluster({
        lab,
        ...(viaBastion ? { bastionLab: publicLab } : {}),
        image: "k8s-v1.36.3",
        names: NAMES,
        clusterName: "k1",
        kubernetes: true,
      });
      figures.foreignCreateMs = Date.now() - t0;
      env = { ...suite.env, SSH_AUTH_SOCK: foreign.agent.socket };
      restoreAgent = useInstallerAgent(foreign);
      suite.wd.writeStackConfig(STACK, stackYaml("k8s-v1.36.3"));
      // The workload and the API client go through the cluster's load balancer from the host.
      await writeHostAdminConf(foreign, NAMES[0], join(suite.wd.dir, "admin.conf"));
      await deployWorkload(await labKubeConfig(join(suite.wd.dir, "admin.conf")), { replicas: 3, minAvailable: 2 });
    });

    after(async function () {
      this.timeout(1_200_000);
      console.log("    figures:", JSON.stringify(figures));
      await suite?.teardown();
      await foreign?.destroy();
      restoreAgent?.();
      for (const l of viaBastion ? [lab, publicLab] : [lab])
        assert.deepEqual(labLeftovers(l), { netns: [], ports: [], machineDirs: [], haproxy: [] });
    });

    let adopted = false;
    it("adopts it from KubeOne's terraform output (host keys from known_hosts)", async function () {
      this.timeout(300_000);
      const t = Date.now();
      const run = await adoptFromTerraform(foreign, suite.wd.dir, STACK, cli);
      figures.adoptMs = Date.now() - t;
      assert.equal(run.code, 0, run.stdout + run.stderr);
      const st = await suite.stored();
      assert.deepEqual(st.nodes.map((n) => n.name).sort(), NAMES);
      assert.ok(st.nodes.every((n) => n.adopted?.source === "kubeone" && n.kubernetesVersion === "1.36.3"));
      adopted = true;
    });

    it(
      "rolls it to the next lab image with no failed API request, leaving the foreign machines reset and " + "listed",
      async function () {
        this.timeout(1_800_000);
        assert.ok(adopted, "adopted first");
        suite.wd.writeStackConfig(STACK, stackYaml("k8s-v1.37.2"));
        const kc = await labKubeConfig(join(suite.wd.dir, "admin.conf"));
        const probe = await startApiProbe(kc, 100);
        const t = Date.now();
        const run = await cli("rollout", "--stack", STACK, "--yes", "--json");
        figures.rolloutMs = Date.now() - t;
        const stats = await probe.stop();
        figures.api = { requests: stats.requests, failures: stats.failures, longestOutageMs: stats.longestOutageMs };
        assert.equal(
          run.code,
          0,
          run.stdout
            .split(/\n|\\n/)
            .filter((l) => /error|fail|decision/i.test(l))
            .slice(-40)
            .join("\n"),
        );
        const s = summaryOf(run) as ReturnType<typeof summaryOf> & {
          leftForOwner?: { node: string; done: string[] }[];
        };
        assert.equal(s.result, "succeeded", s.reason);
        assert.equal(stats.failures, 0, `no failed API request: ${stats.errors.join("; ")}`);
        assert.deepEqual(s.leftForOwner?.map((m) => m.node).sort(), NAMES);
        assert.ok(s.leftForOwner!.every((m) => m.done.includes("kubeadm reset") && m.done.includes("Node deleted")));
        const st = await suite.stored();
        const mine = st.nodes.map((n) => n.name).sort();
        assert.ok(st.nodes.every((n) => !n.adopted && n.image === "k8s-v1.37.2"));
        assert.deepEqual(await members(st), mine, "etcd members == molt's nodes");
        assert.deepEqual(lbServers(foreign), mine, "the cluster's HAProxy lists molt's nodes only");
        const { CoreV1Api } = await import("@kubernetes/client-node");
        const nodes = (await kc.makeApiClient(CoreV1Api).listNode()).items.map((n) => n.metadata!.name!).sort();
        assert.deepEqual(
          nodes.filter((n) => NAMES.includes(n)),
          [],
          "no Node of the foreign machines",
        );
        for (const n of NAMES) {
          const left = await foreign.ssh(
            n,
            "ls /etc/kubernetes/manifests 2>/dev/null; ss -ltnH 'sport = :2379 or sport = :6443'",
          );
          assert.equal(left.trim(), "", `${n} is reset: no static pod, no etcd, no API server`);
        }
        const noop = await cli("rollout", "--stack", STACK, "--yes", "--json");
        assert.equal(noop.code, 0);
        assert.equal(summaryOf(noop).result, "noop");
      },
    );
  },
);
