// The lab as a cloud: machines, SSH with pinned host keys, stacked etcd over TLS through
// SSH tunnels, the load balancer, and a destroy that leaves nothing behind.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import type { Stack } from "@pulumi/pulumi/automation";
import { buildProgram, type MoltOutputs } from "../../infra/program";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import { generateSshKeyPair, HostKeyMismatchError, SshSession } from "../../infra/remote/ssh";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import { openStack } from "../../orchestrator/stack/driver";
import { makeWorkDir, type TestWorkDir } from "../support/workdir";
import { labLeftovers, testLab } from "../support/lab";
import { startClusterProbe } from "../support/probe";

const lab = testLab(1);
const entry = (name: string, generation: number, init = false): NodeEntry => ({
  name,
  image: "lab-v1",
  role: "control-plane",
  generation,
  init,
});

describe("the lab (e2e)", function () {
  let wd: TestWorkDir;
  let stack: Stack;
  let etcd: EtcdAccess | undefined;
  const timings: Record<string, number> = {};

  async function upWith(nodes: NodeEntry[]) {
    stack = await openStack({
      stackName: "lab-e2e",
      workDir: wd.dir,
      env: wd.env,
      program: buildProgram({ provider: "lab", nodes, sshUser: "root", lab, joinDeadlineSeconds: 120 }),
    });
    const t = Date.now();
    const r = await stack.up();
    assert.equal(r.summary.result, "succeeded");
    return { ms: Date.now() - t, outputs: await stack.outputs() };
  }

  async function access(): Promise<{ access: EtcdAccess; molt: MoltOutputs }> {
    const out = await stack.outputs();
    const molt = out.molt.value as MoltOutputs;
    return {
      access: await EtcdAccess.open(molt.endpoints, {
        user: molt.sshUser,
        privateKey: out.sshPrivateKey.value as string,
      }),
      molt,
    };
  }

  before(() => (wd = makeWorkDir()));
  after(async () => {
    await etcd?.close();
    try {
      if (stack) await stack.destroy();
    } finally {
      wd.cleanup();
    }
    console.log("    lab figures:", JSON.stringify(timings));
  });

  it("creates a 3-machine cluster whose etcd has 3 healthy voting members over TLS through SSH tunnels", async () => {
    const first = await upWith([entry("n1", 1, true)]);
    timings.firstNodeUpMs = first.ms;
    const three = await upWith([entry("n1", 1, true), entry("n2", 2), entry("n3", 3)]);
    timings.twoJoinsUpMs = three.ms;
    const a = await access();
    etcd = a.access;
    const members = await etcd.memberList("n1");
    assert.deepEqual(members.map((m) => m.name).sort(), ["n1", "n2", "n3"]);
    assert.ok(
      members.every((m) => !m.isLearner),
      "no learner left behind",
    );
    const statuses = await Promise.all(["n1", "n2", "n3"].map((n) => etcd!.status(n)));
    const leaders = new Set(statuses.map((s) => s.leader));
    assert.equal(leaders.size, 1, "every member sees the same leader");
    assert.ok(
      members.some((m) => m.id === [...leaders][0]),
      "the leader is a member",
    );
    assert.ok(statuses.every((s) => s.errors.length === 0));
    // Each machine is its own host: hostname, address and image come from inside it.
    const n2 = etcd.session("n2")!;
    assert.equal((await n2.run("hostname", "hostname")).trim(), "n2");
    assert.match(await n2.run("cat /etc/os-release", "os-release"), /molt lab OS 1/);
    assert.equal(
      (await n2.run("ls /etc/kubernetes/pki/etcd | sort | tr '\\n' ' '", "pki")).trim(),
      "ca.crt ca.key ca.srl healthcheck-client.crt healthcheck-client.key peer.crt peer.key server.crt server.key",
    );
    // Memory per machine: RSS of every process in its namespace.
    const ns = a.molt.endpoints.find((e) => e.name === "n2") && `molt-${lab.lab}-n2`;
    const pids = execFileSync("ip", ["netns", "pids", ns!], { encoding: "utf8" }).split("\n").filter(Boolean);
    const rssKb = pids
      .map((p) => Number(execFileSync("ps", ["-o", "rss=", "-p", p], { encoding: "utf8" }).trim() || 0))
      .reduce((x, y) => x + y, 0);
    timings.machineRssMiB = Math.round(rssKb / 1024);
  });

  it("writes and reads a key through the tunnels", async () => {
    const client = etcd!.voters(["n1", "n2", "n3"]);
    await client.put("molt/hello").value("world");
    assert.equal(await client.get("molt/hello").string(), "world");
    client.close();
  });

  it("refuses SSH to a machine that presents another host key", async () => {
    const molt = (await stack.outputs()).molt.value as MoltOutputs;
    const n1 = molt.endpoints.find((e) => e.name === "n1")!;
    const key = (await stack.outputs()).sshPrivateKey.value as string;
    const wrong = generateSshKeyPair("wrong").publicKey;
    await assert.rejects(
      SshSession.connect({ host: n1.sshHost, port: n1.sshPort, user: "root", privateKey: key, hostKey: wrong }),
      HostKeyMismatchError,
    );
    const right = await SshSession.connect({
      host: n1.sshHost,
      port: n1.sshPort,
      user: "root",
      privateKey: key,
      hostKey: n1.hostPublicKey,
    });
    right.close();
  });

  it("adds a fourth machine and removes the first by hand through the stack, keeping quorum throughout", async () => {
    // The probe has its own tunnels, following the lab's machines as they come and go.
    const probe = startClusterProbe(lab, (await stack.outputs()).sshPrivateKey.value as string);
    const probeStart = Date.now();
    const four = await upWith([entry("n1", 1, true), entry("n2", 2), entry("n3", 3), entry("n4", 4)]);
    timings.joinOneMemberUpMs = four.ms;
    const previous = etcd!;
    etcd = (await access()).access;
    await previous.close();
    // Remove n1's member the safe way: leadership away first, then remove, then prune.
    const members = await etcd.memberList("n2");
    const n1 = members.find((m) => m.name === "n1")!;
    const leader = (await etcd.status("n2")).leader;
    const transfers = leader === n1.id ? 1 : 0;
    if (leader === n1.id) {
      const target = members.find((m) => m.name === "n4")!;
      await etcd.moveLeader("n1", target.id);
    }
    await etcd.memberRemove("n2", n1.id);
    await etcd.memberRemove("n3", n1.id); // idempotent: a retried remove is not an error
    const pruned = await upWith([entry("n2", 2), entry("n3", 3), entry("n4", 4)]);
    timings.pruneOneUpMs = pruned.ms;
    const report = await probe.stop();
    timings.probeOk = report.ok;
    timings.probeFailed = report.failed;
    timings.probeLongestGapMs = report.longestGapMs;
    timings.probeRetried = report.retried.length;
    assert.equal(report.failed, 0, `probe failures: ${report.errors.join("; ")}`);
    assert.ok(report.longestGapMs < 5000, `longest gap ${report.longestGapMs} ms (5 s at most)`);
    // etcd drops the proposals in flight while leadership moves: at most one retried round trip.
    assert.ok(
      report.retried.length <= transfers,
      `${report.retried.length} round trip(s) retried, ${transfers} leader transfer: ${report.retried.join("; ")}`,
    );
    // The probe really ran: at least a round trip per second of the time it was not reopening its
    // tunnels (machines came and went), and never fewer than 10. A fixed 20 failed once in CI at
    // exactly 20 when the join and prune got faster.
    const probeWallMs = Date.now() - probeStart;
    const floor = Math.max(10, Math.floor((probeWallMs - report.reconnectMs) / 1000));
    assert.ok(
      report.ok >= floor,
      `the probe really ran: ${report.ok} round trips, want >= ${floor} in ${probeWallMs} ms`,
    );
    const old = etcd;
    etcd = (await access()).access;
    await old.close();
    const after = await etcd.memberList("n2");
    assert.deepEqual(after.map((m) => m.name).sort(), ["n2", "n3", "n4"]);
    const reader = etcd.voters(["n2"]);
    for (const [k, v] of report.acknowledged) {
      const got = await reader.get(k).string();
      assert.equal(got, v, `acknowledged write ${k} lost`);
    }
  });

  it("destroys the stack and leaves nothing behind", async () => {
    await etcd?.close();
    etcd = undefined;
    const t = Date.now();
    await stack.destroy();
    timings.destroyMs = Date.now() - t;
    const left = labLeftovers(lab);
    assert.deepEqual(left, { netns: [], ports: [], machineDirs: [], haproxy: [] });
  });
});
