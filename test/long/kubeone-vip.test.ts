// Adopting a cluster whose API endpoint VIP is KubeOne's own keepalived (issue #29 item 8),
// on the lab, outside `npm test`: a foreign etcd-only cluster made without molt's code path
// (test/support/foreign.ts), its VIP moved by keepalived the way KubeOne's vSphere example
// sets it up (test/support/kubeone-vip.ts: preempting priorities 101/100, auth_pass, a check
// script with weight -2). `molt adopt` in VIP mode refuses a stack whose virtual_router_id is
// not the group's, then adopts it; a rollout replaces every adopted node add-first while a
// client writes and reads through the VIP the whole time: molt's nodes join the group, the
// adopted holder hands the VIP over before it is touched, and no request fails. The group's
// auth_pass appears in nothing molt printed or stored in clear.
// Run: npm run build && flock /tmp/molt-lab.lock npx mocha --no-config --timeout 1800000 \
//   dist/test/long/kubeone-vip.test.js   (root; lab t28)
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { netnsName } from "../../infra/lab/host";
import { addressesIn } from "../../orchestrator/edges/vip";
import { runCli, startCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { createForeignCluster, type ForeignCluster } from "../support/foreign";
import { installKubeOneVip, randomAuthPass, type KubeOneVip } from "../support/kubeone-vip";
import { labLeftovers, testLab } from "../support/lab";
import { leaderTransfers } from "../support/round-trips";
import { CONNECTION_FAILURE, readClientTls, startVipProbe } from "../support/vip-probe";

const lab = testLab(28);
const STACK = "kvip";
const NAMES = ["kvip-cp-1", "kvip-cp-2", "kvip-cp-3"];
const VIP: KubeOneVip = { address: "10.77.128.5", virtualRouterId: 42, authPass: randomAuthPass() };

describe("adopting a cluster whose API VIP is KubeOne's keepalived (long, lab t28)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  let foreign: ForeignCluster;
  const figures: Record<string, unknown> = {};
  const printed: string[] = [];

  const stackYaml = (image: string, virtualRouterId = VIP.virtualRouterId) =>
    stringify({
      config: {
        "molt:provider": "lab",
        "molt:replicas": 3,
        "molt:image": image,
        "molt:timeouts": { joinSeconds: 120, settleSeconds: 30 },
        "molt:ssh": { agent: true },
        "molt:lab": { name: lab.lab, bridge: lab.bridge, subnet: lab.subnet },
        "molt:apiEndpoint": { mode: "vip", address: VIP.address, virtualRouterId },
      },
    });
  const cli = async (...args: string[]): Promise<CliRun> => {
    const run = await runCli(args, env);
    printed.push(run.stdout, run.stderr);
    return run;
  };
  const knownHosts = () => {
    const f = join(suite.wd.dir, "known_hosts");
    writeFileSync(f, foreign.knownHosts());
    return f;
  };
  const adopt = () =>
    cli(
      "adopt",
      "--stack",
      STACK,
      "--json",
      ...foreign.nodes.flatMap((n) => ["--host", n.address]),
      "--known-hosts",
      knownHosts(),
    );
  const errorOf = (run: CliRun) => run.events.find((e) => e.type === "error") as { message: string } | undefined;
  /** Which lab machines have the VIP on an interface (asked from the host, per namespace). */
  const holders = (names: string[]) =>
    names.filter((n) => {
      try {
        const out = execFileSync("ip", ["netns", "exec", netnsName(lab.lab, n), "ip", "-o", "-4", "addr", "show"], {
          encoding: "utf8",
        });
        return addressesIn(out).includes(VIP.address);
      } catch {
        return false;
      }
    });
  const machineFile = (node: string, path: string) =>
    join(lab.labRoot, "labs", lab.lab, "machines", node, "root", path.replace(/^\//, ""));
  /** Every file under a directory that holds the group's password in clear. */
  const filesWithPass = (dir: string): string[] =>
    readdirSync(dir, { recursive: true, encoding: "utf8" })
      .map((f) => join(dir, f))
      .filter((f) => statSync(f).isFile() && readFileSync(f).includes(VIP.authPass));

  before(async function () {
    this.timeout(600_000);
    suite = cliSuite("molt-kvip-", STACK, lab);
    const t = Date.now();
    foreign = await createForeignCluster({
      lab,
      image: "etcd-v3.5.11",
      names: NAMES,
      clusterName: "kvip",
      kubernetes: false,
      clientVip: VIP.address,
    });
    await installKubeOneVip(foreign, VIP);
    figures.foreignCreateMs = Date.now() - t;
    env = { ...suite.env, SSH_AUTH_SOCK: foreign.agent.socket };
    // The stack's destroy (in this process) logs in to molt's nodes with the agent too.
    savedSock = process.env.SSH_AUTH_SOCK;
    process.env.SSH_AUTH_SOCK = foreign.agent.socket;
  });
  let savedSock: string | undefined;
  after(async function () {
    this.timeout(600_000);
    console.log("    kubeone-vip figures:", JSON.stringify(figures));
    await suite?.teardown();
    await foreign?.destroy();
    if (savedSock === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = savedSock;
    assert.deepEqual(labLeftovers(lab), { netns: [], ports: [], machineDirs: [], haproxy: [] }, "nothing left");
  });

  it("the installer's group holds the VIP on its MASTER, built without molt", () => {
    assert.deepEqual(holders(NAMES), [NAMES[0]]);
    const conf = readFileSync(machineFile(NAMES[1], "/etc/keepalived/keepalived.conf"), "utf8");
    assert.match(conf, /auth_pass /);
    assert.match(conf, /priority 100/);
  });

  it("bad input, exit 2, nothing recorded: a virtual_router_id not the group's, named with the fix", async function () {
    this.timeout(300_000);
    suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.5.11", 43));
    const run = await adopt();
    assert.equal(run.code, 2, run.stdout + run.stderr);
    const message = errorOf(run)!.message;
    assert.match(message, /virtual_router_id 42: set molt:apiEndpoint\.virtualRouterId: 42/);
    const st = await suite.stored().catch(() => undefined);
    assert.equal(st?.nodes.length ?? 0, 0);
  });

  let adopted = false;
  it("adopts it: the group read from the hosts, each host's priority recorded", async function () {
    this.timeout(300_000);
    suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.5.11"));
    const t = Date.now();
    const run = await adopt();
    figures.adoptMs = Date.now() - t;
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const check = run.events.find((e) => e.type === "check" && e.check === "vip") as { detail: string } | undefined;
    assert.match(check?.detail ?? "", /virtual_router_id 42 for 10\.77\.128\.5 on 3 hosts \(auth_type PASS/);
    const st = await suite.stored();
    const priorities = Object.fromEntries(st.nodes.map((n) => [n.name, n.adopted?.keepalived?.priority]));
    assert.deepEqual(priorities, { [NAMES[0]]: 101, [NAMES[1]]: 100, [NAMES[2]]: 100 });
    adopted = true;
  });

  it(
    "replaces every adopted node add-first with a client on the VIP: molt's nodes join the group, " +
      "the holder hands over first, 0 failed",
    async function () {
      this.timeout(1_200_000);
      assert.ok(adopted, "the cluster was adopted");
      suite.wd.writeStackConfig(STACK, stackYaml("etcd-v3.5.35"));
      const tls = await readClientTls(
        {
          name: NAMES[0],
          privateAddress: foreign.nodes[0].address,
          sshHost: foreign.nodes[0].address,
          sshPort: 22,
          hostPublicKey: foreign.nodes[0].hostKey,
          providerId: "",
        },
        foreign.operatorKey.privateKey,
      );
      const timeline: string[] = [];
      const probe = startVipProbe(VIP.address, tls);
      const t = Date.now();
      const run = await startCli(["rollout", "--stack", STACK, "--yes", "--json"], env, (e) => {
        if (e.type !== "decision") return;
        const op = e.operation as { kind: string; node?: string };
        timeline.push(`${new Date().toISOString().slice(11, 23)} ${op.kind}${op.node ? ` ${op.node}` : ""}`);
      }).done;
      const wallMs = Date.now() - t;
      const report = await probe.stop();
      printed.push(run.stdout, run.stderr);
      const s = summaryOf(run);
      figures.roll = {
        wallMs,
        endpointMs: s.phases.endpoint,
        probe: {
          ok: report.ok,
          failed: report.failed,
          retried: report.retried,
          longestGapMs: report.longestGapMs,
          holderChanges: report.holders.length - 1,
        },
      };
      const seen = `\ndecisions as seen:\n  ${timeline.join("\n  ")}`;
      assert.equal(run.code, 0, `${s.result}: ${s.reason}${seen}\n${run.stderr.slice(-2000)}`);

      // The adopted holder gave the VIP away before anything was taken from it.
      const ops = run.events
        .filter((e) => e.type === "decision")
        .map((e) => e.operation as { kind: string; node?: string; from?: string });
      const release = ops.findIndex((d) => d.kind === "release-vip");
      assert.ok(release >= 0, `the VIP was released${seen}`);
      assert.equal(ops[release].node, NAMES[0], "by the adopted MASTER");
      const touched = ops.findIndex(
        (d) => (d.node === NAMES[0] || d.from === NAMES[0]) && d.kind !== "release-vip" && d.kind !== "wait",
      );
      assert.ok(release < touched, `before its leadership or member was touched${seen}`);

      // The client never failed; etcd's leadership moves cost at most one retried round trip each.
      assert.ok(report.ok > 100, `the client really ran (${report.ok} round trips)`);
      assert.ok(report.holders.length >= 2, "the client saw the VIP answered by another member");
      assert.equal(report.failed, 0, `failed requests through the VIP: ${report.errors.join("; ")}${seen}`);
      const unreachable = report.retried.filter((e) => CONNECTION_FAILURE.test(e));
      assert.ok(
        report.retried.length <= leaderTransfers(run.events) && unreachable.length === 0,
        `round trips retried: ${report.retried.join("; ") || "none"}${seen}`,
      );

      // molt's nodes are the group now: one holds the VIP, each runs the group's id and password.
      const st = await suite.stored();
      const names = st.nodes.map((n) => n.name);
      assert.ok(st.nodes.every((n) => !n.adopted && n.image === "etcd-v3.5.35"));
      const now = holders([...names, ...NAMES]);
      assert.equal(now.length, 1, `one holder: ${now}`);
      assert.ok(names.includes(now[0]), `a molt node holds the VIP (${now[0]})`);
      for (const n of names) {
        const conf = readFileSync(machineFile(n, "/etc/keepalived/keepalived.conf"), "utf8");
        assert.match(conf, /virtual_router_id 42\n/);
        assert.ok(conf.includes(`auth_pass ${VIP.authPass}\n`), `${n} joined with the group's password`);
        const priority = Number(/priority (\d+)/.exec(conf)?.[1]);
        assert.ok(priority > 101, `${n} ranks above every adopted node (${priority})`);
      }
      // The retired adopted machines run no keepalived and keep no copy of the password.
      for (const n of NAMES) {
        assert.equal(
          (await foreign.ssh(n, "cat /proc/$(cat /run/keepalived.pid 2>/dev/null)/comm 2>/dev/null || true")).trim(),
          "",
          `${n} runs no keepalived`,
        );
        assert.ok(!existsSync(machineFile(n, "/etc/keepalived/keepalived.conf")), `${n} keeps no keepalived.conf`);
      }
    },
  );

  it("the group's auth_pass is in nothing molt printed, and in no file of the stack's backend in clear", () => {
    assert.ok(adopted, "the cluster was adopted");
    assert.ok(!printed.some((p) => p.includes(VIP.authPass)), "not in any output");
    const where = [join(suite.wd.dir, "state"), join(suite.wd.dir, "home"), join(suite.wd.dir, "stacks")];
    assert.deepEqual(where.flatMap(filesWithPass), [], "not in the state, its backups or history");
  });
});
