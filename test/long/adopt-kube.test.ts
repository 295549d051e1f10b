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
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import type { StoredState } from "../../orchestrator/core/nodes";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { createForeignCluster, lbServers, type ForeignCluster } from "../support/foreign";
import { deployWorkload, labKubeConfig, startApiProbe } from "../support/kube-workload";
import { labLeftovers, testLab } from "../support/lab";

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
    let savedSock: string | undefined;

    const stackYaml = (image: string) =>
      stringify({
        config: {
          "molt:provider": "lab",
          "molt:replicas": 3,
          "molt:image": image,
          "molt:timeouts": { joinSeconds: 300, settleSeconds: 60, drainSeconds: 120 },
          "molt:ssh": {
            agent: true,
            ...(foreign.bastion
              ? { bastion: { host: foreign.bastion.address, hostKey: foreign.bastion.hostKey } }
              : {}),
          },
          "molt:lab": {
            name: lab.lab,
            bridge: lab.bridge,
            subnet: lab.subnet,
            ...(viaBastion ? { isolated: true } : {}),
            loadBalancer: {
              lab: foreign.lb!.inputs.lab,
              address: foreign.lb!.endpoint,
              ...(foreign.lb!.inputs.netns ? { netns: foreign.lb!.inputs.netns, bind: foreign.lb!.inputs.bind } : {}),
            },
          },
        },
      });
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
      savedSock = process.env.SSH_AUTH_SOCK;
      process.env.SSH_AUTH_SOCK = foreign.agent.socket;
      suite.wd.writeStackConfig(STACK, stackYaml("k8s-v1.36.3"));
      // The workload and the API client go through the cluster's load balancer from the host.
      const admin = (await foreign.ssh(NAMES[0], "cat /etc/kubernetes/admin.conf")).replace(
        /server: https:\/\/[^\s]+/,
        `server: https://${foreign.lb!.hostEndpoint}`,
      );
      writeFileSync(join(suite.wd.dir, "admin.conf"), admin, { mode: 0o600 });
      await deployWorkload(await labKubeConfig(join(suite.wd.dir, "admin.conf")), { replicas: 3, minAvailable: 2 });
    });

    after(async function () {
      this.timeout(1_200_000);
      console.log("    figures:", JSON.stringify(figures));
      await suite?.teardown();
      await foreign?.destroy();
      if (savedSock === undefined) delete process.env.SSH_AUTH_SOCK;
      else process.env.SSH_AUTH_SOCK = savedSock;
      for (const l of viaBastion ? [lab, publicLab] : [lab])
        assert.deepEqual(labLeftovers(l), { netns: [], ports: [], machineDirs: [], haproxy: [] });
    });

    let adopted = false;
    it("adopts it from KubeOne's terraform output (host keys from known_hosts)", async function () {
      this.timeout(300_000);
      const tf = join(suite.wd.dir, "tf.json");
      writeFileSync(tf, foreign.terraformOutput());
      const kh = join(suite.wd.dir, "known_hosts");
      writeFileSync(kh, foreign.knownHosts());
      const t = Date.now();
      const run = await cli("adopt", "--stack", STACK, "--json", "--terraform-output", tf, "--known-hosts", kh);
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
