// Adoption end to end on the lab, through the CLI: a foreign etcd cluster (made without
// molt's code path, test/support/foreign.ts) on an isolated bridge, reachable only through
// a dual-homed bastion with its own pinned sshd. `molt adopt` refuses every bad input with
// exit 2 (6 for unconfirmed host keys) and records nothing; then adopts it; etcd's 3.5 ->
// 3.6 patch floor refuses 3.5.11 -> 3.6 on real binaries; a rollout to 3.5.35 replaces the
// adopted nodes add-first with a client writing the whole time, then 3.5.35 -> 3.6 works,
// and a second rollout is a no-op.
import { readClusterLease } from "../../orchestrator/lease/cluster";
import * as assert from "node:assert/strict";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { generateSshKeyPair, fingerprintOf, type BastionTarget } from "../../infra/remote/ssh";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import { inspect } from "../../orchestrator/inspect";
import type { StoredState } from "../../orchestrator/core/nodes";
import { openStack } from "../../orchestrator/stack/driver";
import { readStoredState } from "../../orchestrator/stack/state";
import { runCli, startCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { createForeignCluster, type ForeignCluster } from "../support/foreign";
import { labLeftovers, testLab } from "../support/lab";
import { startClusterProbe } from "../support/probe";
import { leaderTransfers } from "../support/round-trips";
import { longRun } from "../support/long";

const publicLab = testLab(17);
const lab = { ...testLab(18), isolated: true as const };
const STACK = "legacy";
/** A second stack that tries to adopt the same cluster (from a lab name of its own: nothing is made there). */
const RIVAL = "legacy-rival";
const RIVAL_LAB = `${lab.lab}-rival`;
const NAMES = ["legacy-etcd-a", "legacy-etcd-b", "legacy-etcd-c"];

describe("adopting a foreign etcd cluster behind a bastion (e2e)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  let foreign: ForeignCluster;
  let stranger: ForeignCluster;
  const figures: Record<string, unknown> = {};
  const outputs: string[] = [];

  const stackYaml = (image: string, o: { bastionUser?: string; labName?: string } = {}) =>
    stringify({
      config: {
        "molt:provider": "lab",
        "molt:replicas": 3,
        "molt:image": image,
        "molt:timeouts": { joinSeconds: 120, settleSeconds: 30 },
        "molt:ssh": {
          agent: true,
          bastion: {
            host: foreign.bastion!.address,
            user: o.bastionUser ?? "root",
            hostKey: foreign.bastion!.hostKey,
          },
        },
        "molt:lab": {
          name: o.labName ?? lab.lab,
          bridge: lab.bridge,
          subnet: lab.subnet,
          isolated: true,
          loadBalancer: {
            lab: foreign.lb!.inputs.lab,
            address: foreign.lb!.endpoint,
            netns: foreign.bastion!.netns,
            bind: "0.0.0.0",
          },
        },
        // The lease in the adopted cluster's own etcd, as on Pulumi Cloud or gs:// (issue #20):
        // adoption takes it there, and every rollout after it, each `up` under the state guard.
        "molt:lock": { in: "cluster" },
      },
    });
  const bastion = (): BastionTarget => ({
    host: foreign.bastion!.address,
    user: "root",
    hostKey: foreign.bastion!.hostKey,
    agent: foreign.agent.socket,
  });

  const cli = async (...args: string[]): Promise<CliRun> => {
    const run = await runCli(args, env);
    outputs.push(run.stdout, run.stderr);
    return run;
  };
  const adopt = (...extra: string[]) => cli("adopt", "--stack", STACK, "--json", ...extra);
  /** When each decision and phase reached the test, to set beside the client's failures when there are any. */
  const timeline: string[] = [];
  const rollout = async (): Promise<CliRun> => {
    timeline.length = 0;
    const run = await startCli(["rollout", "--stack", STACK, "--yes", "--json"], env, (e) => {
      const at = new Date().toISOString().slice(11, 23);
      if (e.type === "decision") {
        const op = e.operation as { kind: string; node?: string };
        timeline.push(`${at} decision ${op.kind}${op.node ? ` ${op.node}` : ""}`);
      } else if (e.type === "phase") timeline.push(`${at}   ${e.phase} ${e.operation} ${e.node ?? ""} ${e.ms} ms`);
    }).done;
    outputs.push(run.stdout, run.stderr);
    return run;
  };
  const hostArgs = (c: ForeignCluster) => c.nodes.flatMap((n) => ["--host", n.address]);
  const knownHosts = (c: ForeignCluster) => {
    const f = join(suite.wd.dir, `known_hosts-${c.clusterName}`);
    writeFileSync(f, c.knownHosts());
    return f;
  };
  const errorOf = (run: CliRun) => run.events.find((e) => e.type === "error") as { message: string } | undefined;

  /** Members as the foreign cluster itself reports them (through the bastion, the installer's key). */
  async function members(): Promise<string[]> {
    return withEtcd(async (access) => {
      for (const n of access.nodes()) {
        try {
          return (await access.memberList(n)).map((m) => m.name).sort();
        } catch {
          /* a retired node: ask the next */
        }
      }
      throw new Error("no member answered");
    });
  }
  /** A holder of the stack's lease in the cluster's etcd, if one is left. */
  const clusterLeaseLeft = () => withEtcd((access) => readClusterLease(access.leaseKv(), STACK));
  async function withEtcd<T>(fn: (access: EtcdAccess) => Promise<T>): Promise<T> {
    const eps: NodeEndpoint[] = foreign.nodes.map((n) => ({
      name: n.name,
      privateAddress: n.address,
      sshHost: n.address,
      sshPort: 22,
      hostPublicKey: n.hostKey,
      providerId: n.name,
    }));
    const st = await storedOrUndefined();
    for (const e of st?.endpoints ?? []) if (!eps.some((x) => x.name === e.name)) eps.push(e);
    const access = await EtcdAccess.open(eps, {
      user: "root",
      agent: foreign.agent.socket,
      ...(st?.sshPrivateKey ? { privateKey: st.sshPrivateKey } : {}),
      bastion: bastion(),
    });
    try {
      return await fn(access);
    } finally {
      await access.close();
    }
  }
  const storedOrUndefined = async (): Promise<StoredState | undefined> =>
    suite.stored().catch((e: Error) => {
      if (/does not exist/.test(e.message)) return undefined;
      throw e;
    });
  /** Nothing recorded: no stack, or a stack with no node. */
  async function assertNothingRecorded(): Promise<void> {
    const st = await storedOrUndefined();
    assert.equal(st?.nodes.length ?? 0, 0, `nothing recorded: ${JSON.stringify(st?.nodes)}`);
  }

  before(async function () {
    this.timeout(600_000);
    suite = cliSuite("molt-adopt-", STACK, lab);
    const t0 = Date.now();
    foreign = await createForeignCluster({
      lab,
      bastionLab: publicLab,
      image: "etcd-v3.5.11",
      names: NAMES,
      clusterName: "legacy",
      kubernetes: false,
    });
    // A one-member cluster of its own on the same private bridge: "a host of another cluster".
    stranger = await createForeignCluster({
      lab,
      image: "etcd-v3.5.11",
      names: ["stranger-etcd"],
      clusterName: "stranger",
      kubernetes: false,
      viaBastionOf: foreign,
    });
    figures.foreignCreateMs = Date.now() - t0;
    env = { ...suite.env, SSH_AUTH_SOCK: foreign.agent.socket };
    // `inspect` runs in this process: the stack logs in with the agent too.
    savedSock = process.env.SSH_AUTH_SOCK;
    process.env.SSH_AUTH_SOCK = foreign.agent.socket;
    suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.5.11"));
  });

  let savedSock: string | undefined;
  after(async function () {
    this.timeout(600_000);
    console.log("    figures:", JSON.stringify(figures));
    // The stack's destroy logs in through the bastion with the agent: before the agent goes.
    await suite?.teardown();
    await stranger?.destroy();
    await foreign?.destroy();
    // The refused rival stack's claim of its (never made) lab.
    rmSync(join(lab.labRoot, "labs", RIVAL_LAB), { recursive: true, force: true });
    if (savedSock === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = savedSock;
    for (const l of [lab, publicLab]) {
      const left = labLeftovers(l);
      assert.deepEqual(left, { netns: [], ports: [], machineDirs: [], haproxy: [] }, `nothing left of ${l.lab}`);
    }
  });

  // Mocha runs a suite's tests in order: the bad inputs first, on the cluster as it is.
  it(
    "bad input, exit 6 and nothing recorded: host keys nobody named: prints the fingerprints it saw and exits " + "6",
    async () => {
      const run = await adopt(...hostArgs(foreign));
      assert.equal(run.code, 6, run.stdout + run.stderr);
      const err = errorOf(run)!;
      for (const n of foreign.nodes) assert.ok(err.message.includes(fingerprintOf(n.hostKey)), err.message);
      assert.match(err.message, /--host-key 10\.77\.118\.\d+=SHA256:/);
      await assertNothingRecorded();
    },
  );

  it("bad input, exit 2 and nothing recorded: a wrong fingerprint", async () => {
    const other = fingerprintOf(generateSshKeyPair("x").publicKey);
    const run = await adopt(
      ...hostArgs(foreign),
      "--known-hosts",
      knownHosts(foreign),
      "--host-key",
      `${foreign.nodes[1].address}=${other}`,
    );
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(
      errorOf(run)!.message,
      new RegExp(`${foreign.nodes[1].address}:22 presents SHA256:.*expects ${other.replace(/[+/]/g, "\\$&")}`),
    );
    await assertNothingRecorded();
  });

  it("bad input, exit 2 and nothing recorded: unreachable hosts, each named, none blamed on the bastion", async () => {
    const run = await adopt(
      ...hostArgs(foreign),
      "--host",
      "10.77.118.250",
      "--host",
      "10.77.118.251",
      "--known-hosts",
      knownHosts(foreign),
    );
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const message = errorOf(run)!.message;
    for (const host of ["10.77.118.250", "10.77.118.251"])
      assert.match(message, new RegExp(`host ${host.replace(/\./g, "\\.")}:22 is not reachable over SSH: bastion `));
    assert.doesNotMatch(message, /the bastion refused/);
    await assertNothingRecorded();
  });

  it("bad input, exit 2 and nothing recorded: a member without a host (a host left out)", async () => {
    const run = await adopt(
      "--host",
      foreign.nodes[0].address,
      "--host",
      foreign.nodes[1].address,
      "--known-hosts",
      knownHosts(foreign),
    );
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(errorOf(run)!.message, /etcd member legacy-etcd-c \(https:\/\/10\.77\.118\.\d+:2380\) has no host/);
    await assertNothingRecorded();
  });

  it("bad input, exit 2 and nothing recorded: a host of another cluster mixed in", async () => {
    const kh = join(suite.wd.dir, "known_hosts-both");
    writeFileSync(kh, foreign.knownHosts() + stranger.knownHosts());
    const run = await adopt(...hostArgs(foreign), "--host", stranger.nodes[0].address, "--known-hosts", kh);
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(
      errorOf(run)!.message,
      new RegExp(`host ${stranger.nodes[0].address.replace(/\./g, "\\.")} is not a member of this etcd cluster`),
    );
    await assertNothingRecorded();
  });

  it("bad input, exit 2 and nothing recorded: a bastion that refuses molt", async () => {
    suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.5.11", { bastionUser: "nobody" }));
    try {
      const run = await adopt(...hostArgs(foreign), "--known-hosts", knownHosts(foreign));
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.match(errorOf(run)!.message, /the bastion refused: bastion nobody@10\.77\.117\.\d+:22/);
    } finally {
      suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.5.11"));
    }
    await assertNothingRecorded();
  });

  it(
    "bad input, exit 2 and nothing recorded: a malformed or truncated terraform output, and both input forms at " +
      "once",
    async () => {
      const tf = join(suite.wd.dir, "tf.json");
      writeFileSync(tf, foreign.terraformOutput().slice(0, 300));
      let run = await adopt("--terraform-output", tf);
      assert.equal(run.code, 2);
      assert.match(errorOf(run)!.message, /not valid JSON.*truncated/);
      writeFileSync(tf, JSON.stringify({ kubeone_api: { value: { endpoint: "x:6443" } } }));
      run = await adopt("--terraform-output", tf);
      assert.equal(run.code, 2);
      assert.match(errorOf(run)!.message, /no "kubeone_hosts" output/);
      run = await adopt("--terraform-output", tf, "--host", "10.0.0.1");
      assert.equal(run.code, 2);
      assert.match(errorOf(run)!.message, /either as --terraform-output FILE .* or as --host/);
      await assertNothingRecorded();
    },
  );
  it(
    "bad input, exit 2 and nothing recorded: --import of a machine the lab does not have, or of another " + "host",
    async () => {
      const [a, b] = foreign.nodes;
      let run = await adopt(
        ...hostArgs(foreign),
        "--known-hosts",
        knownHosts(foreign),
        "--import",
        `${a.address}=nosuch`,
      );
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.match(errorOf(run)!.message, /--import .*=nosuch: lab t18 has no machine named "nosuch"/);
      // Another host's machine: its host key is not the one pinned for this host.
      run = await adopt(
        ...hostArgs(foreign),
        "--known-hosts",
        knownHosts(foreign),
        "--import",
        `${a.address}=${b.name}`,
      );
      assert.equal(run.code, 2, run.stdout + run.stderr);
      assert.match(errorOf(run)!.message, /is another host: its SSH host key is not the one adoption pinned/);
      run = await adopt(...hostArgs(foreign), "--known-hosts", knownHosts(foreign), "--import", "10.1.2.3=x");
      assert.equal(run.code, 2);
      assert.match(errorOf(run)!.message, /10\.1\.2\.3 is none of the cluster's hosts/);
      await assertNothingRecorded();
    },
  );
  // External etcd (a kube-apiserver using etcd elsewhere) is refused in the Kubernetes
  // scenario (test/long/adopt-kube.test.ts) and in the probe's unit table.

  let adopted = false;
  it("adopts the cluster: checks, then records adopted entries (nothing on the cluster changes)", async function () {
    this.timeout(300_000);
    const before = await members();
    const t = Date.now();
    // The first host's machine is taken into the stack: molt destroys it when it retires it.
    const imported = foreign.nodes[0];
    const run = await adopt(
      ...hostArgs(foreign),
      "--known-hosts",
      knownHosts(foreign),
      "--import",
      `${imported.address}=${imported.name}`,
    );
    figures.adoptMs = Date.now() - t;
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const st = await suite.stored();
    assert.deepEqual(st.nodes.map((n) => n.name).sort(), NAMES);
    for (const n of st.nodes) {
      const f = foreign.nodes.find((x) => x.name === n.name)!;
      assert.equal(n.image, "adopted");
      assert.ok(n.adopted, "marked adopted");
      assert.equal(n.adopted.address, f.address);
      assert.equal(n.adopted.hostKey.split(" ").slice(0, 2).join(" "), f.hostKey.split(" ").slice(0, 2).join(" "));
      assert.equal(n.adopted.etcdVersion, "3.5.11");
      assert.match(n.adopted.bastion!, /^root@10\.77\.117\.\d+:22$/);
      assert.deepEqual(n.adopted.machine, n.name === imported.name ? { importId: imported.name } : undefined);
      assert.ok(n.generation >= 1 && n.generation <= 3);
    }
    assert.deepEqual(await members(), before, "the members are the same");
    assert.equal(await clusterLeaseLeft(), undefined, "adoption released its lease in the cluster's etcd");
    assert.ok(
      (await suite.exportedResources()).some((u) => u.endsWith("::molt-state-guard")),
      "the record was written under the state guard",
    );
    // plan/status show them as outdated.
    const i = await inspect({ stack: STACK, workDir: suite.wd.dir, env });
    assert.ok(
      i.nodes.every((n) => n.outdated && n.member?.healthy),
      JSON.stringify(i.nodes),
    );
    assert.equal(i.next.kind, "surge");
    // A stack that already has nodes is refused.
    const again = await adopt(...hostArgs(foreign), "--known-hosts", knownHosts(foreign));
    assert.equal(again.code, 2);
    assert.match(errorOf(again)!.message, /already holds nodes/);
    adopted = true;
  });

  it("a second stack's adoption of the same cluster is refused (exit 2), naming the owner", async function () {
    this.timeout(300_000);
    assert.ok(adopted, "the cluster was adopted");
    const marker = await withEtcd((access) => access.leaseKv().get("/molt/owner"));
    const before = await members();
    // A lab of its own (a lab belongs to one stack, lease/lab-claim.ts): as two stacks on two machines
    // would, it reaches the cluster, whose marker refuses it.
    suite.wd.writeStackConfig(RIVAL, stackYaml("etcd-v3.5.11", { labName: RIVAL_LAB }));
    const run = await cli(
      "adopt",
      "--stack",
      RIVAL,
      "--json",
      ...hostArgs(foreign),
      "--known-hosts",
      knownHosts(foreign),
    );
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const message = errorOf(run)!.message;
    assert.ok(
      message.includes(`owned by stack ${STACK} (backend ${env.PULUMI_BACKEND_URL})`),
      `the refusal names the owner: ${message}`,
    );
    assert.match(message, new RegExp(`molt disown --stack ${STACK}`), "it says how to release it");
    assert.match(message, new RegExp(`--take-over ${STACK}`), "and how to take it over");
    // The first adoption's marker in the cluster's etcd names its stack and backend.
    assert.ok(marker, "the cluster holds an ownership marker");
    const owner = JSON.parse(marker.value.toString()) as Record<string, unknown>;
    assert.equal(owner.stack, STACK);
    assert.equal(owner.backend, env.PULUMI_BACKEND_URL);
    assert.equal(owner.by, "adopt");
    assert.deepEqual(await members(), before, "the members are the same");
    const after = await withEtcd((access) => access.leaseKv().get("/molt/owner"));
    assert.equal(after?.revision, marker.revision, "the marker is unchanged");
    const rival = await openStack({
      stackName: RIVAL,
      workDir: suite.wd.dir,
      env,
      create: false,
      program: async () => ({}),
    }).then(
      (s) => readStoredState(s).then((st) => st.nodes.length),
      () => 0,
    );
    assert.equal(rival, 0, `stack ${RIVAL} recorded nothing`);
  });

  it("refuses etcd 3.5.11 -> 3.6 up front (etcd's patch floor, 3.5.32), nothing changed", async function () {
    this.timeout(300_000);
    // A rollout of an empty stack would make a new cluster: only ever after the adoption.
    assert.ok(adopted, "the cluster was adopted");
    suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.6.16"));
    const before = await members();
    const run = await rollout();
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const s = summaryOf(run);
    assert.equal(s.result, "refused");
    assert.match(s.reason, /EtcdUpgradePatch: etcd 3\.6\.16 may not join yet: .*3\.5\.32 or later/);
    assert.match(s.reason, /legacy-etcd-a \(3\.5\.11\)/);
    assert.deepEqual(await members(), before);
    assert.equal((await suite.stored()).nodes.length, 3);
  });

  // The minor upgrade after adoption (3.5.35 -> 3.6) runs in npm run test:long only (CI's time
  // budget): once adopted nodes are replaced they are molt's own, and npm test upgrades etcd's
  // minor add-first in the Kubernetes suite (3.6 -> 3.7).
  const steps = [["etcd-v3.5.35", "3.5.35"], ...(longRun ? [["etcd-v3.6.16", "3.6.16"]] : [])] as const;
  it(
    "replaces the adopted nodes add-first (3.5.11 -> 3.5.35) with a client writing throughout" +
      (longRun ? "; 3.5.35 -> 3.6 then works" : ""),
    async function () {
      this.timeout(900_000);
      assert.ok(adopted, "the cluster was adopted");
      const st0 = await suite.stored();
      for (const [image, etcd] of steps) {
        suite.wd.writeStackConfig(STACK, stackYaml(image));
        const key = (await suite.stored()).sshPrivateKey!;
        // The probe writes through every machine whose etcd still has data (retired ones are wiped).
        const probe = startClusterProbe(lab, key, 100, {
          agent: foreign.agent.socket,
          bastion: bastion(),
          include: (e) =>
            !e.name.startsWith("stranger") &&
            existsSync(join(lab.labRoot, "labs", lab.lab, "machines", e.name, "root/var/lib/etcd/member")),
        });
        const t = Date.now();
        const run = await rollout();
        figures[`rollout-${etcd}-ms`] = Date.now() - t;
        const report = await probe.stop();
        figures[`probe-${etcd}`] = {
          ok: report.ok,
          failed: report.failed,
          retried: report.retried,
          longestGapMs: report.longestGapMs,
        };
        assert.equal(
          run.code,
          0,
          run.stdout
            .split(/\n|\\n/)
            .filter((l) => /error|fail|decision/i.test(l))
            .slice(-40)
            .join("\n") + run.stderr.slice(-2000),
        );
        const s = summaryOf(run) as ReturnType<typeof summaryOf> & { leftForOwner?: { node: string }[] };
        assert.equal(s.result, "succeeded", s.reason);
        const seen = `\nthe rollout as seen:\n  ${timeline.join("\n  ")}`;
        assert.equal(report.failed, 0, `no failed request: ${report.errors.join("; ")}${seen}`);
        assert.ok(report.longestGapMs < 5000, `longest gap ${report.longestGapMs} ms (5 s at most)${seen}`);
        // etcd drops what is in flight while its leadership moves: one retried round trip per
        // transfer at most (the probe has one request in flight), none otherwise.
        const transfers = leaderTransfers(run.events);
        assert.ok(
          report.retried.length <= transfers,
          `${report.retried.length} round trip(s) needed a retry, ${transfers} leader transfer(s): ` +
            `${report.retried.join("; ")}${seen}`,
        );
        assert.ok(
          run.events.some((e) => e.type === "lock" && (e as { scope?: string }).scope === "cluster"),
          "the rollout held its lease in the cluster's etcd",
        );
        assert.equal(await clusterLeaseLeft(), undefined, "and released it");
        const st = await suite.stored();
        assert.equal(st.nodes.length, 3);
        assert.ok(
          st.nodes.every((n) => !n.adopted && n.image === image),
          JSON.stringify(st.nodes),
        );
        assert.deepEqual(await members(), st.nodes.map((n) => n.name).sort(), "members == molt's nodes");
        if (etcd === "3.5.35") {
          const [imported, ...others] = foreign.nodes;
          assert.deepEqual(
            s.leftForOwner?.map((m) => m.node).sort(),
            others.map((n) => n.name),
            "the foreign machines not imported are listed",
          );
          const destroyed = run.events.find((e) => e.type === "adopted-destroyed") as { node: string } | undefined;
          assert.equal(destroyed?.node, imported.name, "the imported machine was destroyed");
          assert.ok(!existsSync(join(lab.labRoot, "labs", lab.lab, "machines", imported.name)), "its machine is gone");
          assert.ok(!labLeftovers(lab).netns.includes(`molt-${lab.lab}-${imported.name}`), "its namespace is gone");
          for (const n of others) {
            assert.ok(
              !existsSync(join(lab.labRoot, "labs", lab.lab, "machines", n.name, "root/var/lib/etcd/member")),
              `${n.name}'s etcd data is gone`,
            );
            assert.equal(
              (await foreign.ssh(n.name, "ss -ltnH 'sport = :2379'")).trim(),
              "",
              `${n.name} serves no etcd`,
            );
          }
          assert.ok(st0.nodes.every((n) => !st.nodes.some((x) => x.name === n.name)));
        }
        const versions = await etcdVersions(st);
        assert.ok(
          Object.values(versions).every((v) => v === etcd),
          JSON.stringify(versions),
        );
      }
      const noop = await rollout();
      assert.equal(noop.code, 0);
      assert.equal(summaryOf(noop).result, "noop");
    },
  );

  it("disown releases the cluster (a marker not molt's is refused, exit 2); a rollout claims it", async function () {
    this.timeout(300_000);
    assert.ok(adopted, "the cluster was adopted");
    const owner = () => withEtcd((access) => access.readOwner());
    const own = await owner();
    assert.ok(own, "the cluster is marked");
    assert.equal(JSON.parse(own.value).stack, STACK, "the rollouts kept the adoption's owner");
    const disown = () => cli("disown", "--stack", STACK, "--json");
    const summary = (run: CliRun) => run.events.find((e) => e.type === "disown-summary") as { result?: string };
    // Bad input: a marker molt did not write (someone's etcdctl put) is refused, and stays.
    const foreignValue = `${STACK} is ours`;
    const w = await withEtcd((access) => access.writeOwner(foreignValue, own.revision));
    assert.ok(w.ok);
    let run = await disown();
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(errorOf(run)!.message, /not valid JSON .*etcdctl get \/molt\/owner/);
    assert.equal((await owner())?.value, foreignValue, "the marker is unchanged");
    assert.ok((await withEtcd((access) => access.writeOwner(own.value, w.ok ? w.revision : ""))).ok);
    // Its own marker: removed, and said so; again: nothing to release.
    run = await disown();
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.equal(summary(run)?.result, "released");
    assert.equal(await owner(), undefined, "the marker is gone");
    run = await disown();
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.equal(summary(run)?.result, "nothing");
    // A rollout of a cluster without a marker (as one made by an older molt) claims it first.
    run = await rollout();
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const kinds = run.events.filter((e) => e.type === "decision").map((e) => (e.operation as { kind: string }).kind);
    assert.deepEqual(kinds, ["claim-ownership", "done"]);
    const claimed = await owner();
    assert.ok(claimed, "claimed again");
    assert.deepEqual(
      (({ stack, backend, by }) => ({ stack, backend, by }))(JSON.parse(claimed.value) as Record<string, string>),
      { stack: STACK, backend: env.PULUMI_BACKEND_URL, by: "rollout" },
    );
  });

  async function etcdVersions(st: StoredState): Promise<Record<string, string>> {
    const access = await EtcdAccess.open(st.endpoints, {
      user: "root",
      privateKey: st.sshPrivateKey!,
      bastion: bastion(),
    });
    try {
      const out: Record<string, string> = {};
      for (const n of st.nodes) out[n.name] = (await access.status(n.name)).version;
      return out;
    } finally {
      await access.close();
    }
  }
});
