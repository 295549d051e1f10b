// Issue #7 parts 3 and 4, through the CLI a user runs, against one live 3-node etcd
// cluster on lab t5: every bad input (config, command line, environment, stored state,
// broken nodes, a held lock) is refused with a message that says what is wrong and what to
// do, with the documented exit code, and provably changes nothing (a fingerprint of the
// stack state, the lab's machines and etcd's member list is equal before and after).
// Then the security checks: a replaced host key is refused, no secret appears in any
// output or file molt writes, and etcd's client port demands a client certificate.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { connect as netConnect } from "node:net";
import { homedir, hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { stringify } from "yaml";
import { ifaceName, netnsName } from "../../infra/lab/host";
import type { NodeEndpoint } from "../../orchestrator/core/nodes";
import { HostKeyMismatchError, SshSession } from "../../infra/remote/ssh";
import { EtcdAccess } from "../../orchestrator/edges/etcd";
import { FileStore } from "../../orchestrator/backend/file";
import { lockKey, readLease } from "../../orchestrator/lease/bucket";
import { runCli, startCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { closeFingerprints, fingerprint, stackStateDir, type Fingerprint } from "../support/fingerprint";
import { testLab } from "../support/lab";

const lab = testLab(5);
const STACK = "bi";
const GHOST = "ghost"; // a stack with a config file but never created

type Conf = Record<string, unknown>;
function goodConf(image = "lab-v1"): Conf {
  return {
    "molt:provider": "lab",
    "molt:replicas": 3,
    "molt:image": image,
    "molt:rollout": { maxSurge: 1 },
    // settleSeconds short: a refusal for an unhealthy member comes after this long.
    "molt:timeouts": { joinSeconds: 120, settleSeconds: 6 },
    "molt:lab": { name: lab.lab, bridge: lab.bridge, subnet: lab.subnet },
  };
}

interface Row {
  name: string;
  code: number | null;
  expected: number | string;
  message: string;
  unchanged: string;
  passed: boolean;
  /** The CLI run(s) / the whole case, seconds. */
  secs?: string;
}

describe("bad input and security (e2e, lab t5)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  let key = "";
  let endpoints: NodeEndpoint[] = [];
  const rows: Row[] = [];
  const outputs: string[] = [];
  const started = Date.now();

  const stateDir = () => join(suite.wd.dir, "state");
  const stackFile = () => join(stackStateDir(stateDir()), `${STACK}.json`);
  const writeConf = (stack: string, c: Conf | string) =>
    suite.wd.writeStackConfig(stack, typeof c === "string" ? c : stringify({ config: c }));
  const fp = (): Promise<Fingerprint> => fingerprint({ stateDir: stateDir(), lab, endpoints, sshPrivateKey: key });
  const machineRoot = (node: string) => join(lab.labRoot, "labs", lab.lab, "machines", node, "root");

  /** Every member answers status, is a voter, and they agree on one leader. */
  async function waitHealthy(deadlineMs = 90_000): Promise<void> {
    const until = Date.now() + deadlineMs;
    let last = "";
    for (;;) {
      try {
        const access = await EtcdAccess.open(endpoints, { user: "root", privateKey: key });
        try {
          if (access.unreachable.size) throw new Error(`unreachable: ${[...access.unreachable.keys()]}`);
          const st = await Promise.all(access.nodes().map((n) => access.status(n)));
          const leaders = new Set(st.map((s) => s.leader));
          if (
            st.length === endpoints.length &&
            leaders.size === 1 &&
            !leaders.has("0") &&
            st.every((s) => !s.isLearner)
          )
            return;
          last = `leaders ${[...leaders]}`;
        } finally {
          await access.close();
        }
      } catch (e) {
        last = (e as Error).message.split("\n")[0];
      }
      if (Date.now() > until) throw new Error(`cluster not healthy after ${deadlineMs} ms: ${last}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** The message a run gives: its JSON error event, its refusal, else stderr (or stdout). */
  function messageOf(run: CliRun): string {
    const err = run.events.find((e) => e.type === "error");
    if (err) return String(err.message);
    const sum = run.events.find((e) => e.type === "summary");
    if (sum) return String(sum.reason);
    return (run.stderr.trim() || run.stdout.trim()).replace(/^molt: /, "");
  }

  interface Case {
    name: string;
    args: string[];
    expect: number;
    message: RegExp;
    /** The live stack's config during the case (default: the good one). */
    conf?: Conf | string;
    env?: Record<string, string>;
    setup?: () => Promise<void> | void;
    restore?: () => Promise<void> | void;
    check?: (run: CliRun) => void;
    /** Run something else than one CLI call (e.g. two at once). */
    run?: () => Promise<CliRun>;
  }

  function badCase(c: Case): void {
    it(`${c.name} → exit ${c.expect}`, async function () {
      const row: Row = { name: c.name, code: null, expected: c.expect, message: "", unchanged: "?", passed: false };
      rows.push(row);
      if (c.conf !== undefined) writeConf(STACK, c.conf);
      let before: Fingerprint | undefined;
      let after: Fingerprint | undefined;
      let run: CliRun;
      const t0 = Date.now();
      let runMs = 0;
      try {
        await c.setup?.();
        before = await fp();
        const t1 = Date.now();
        run = c.run ? await c.run() : await runCli(c.args, { ...env, ...c.env });
        runMs = Date.now() - t1;
        after = await fp();
      } finally {
        try {
          await c.restore?.();
        } finally {
          writeConf(STACK, goodConf());
        }
      }
      row.secs = `${(runMs / 1000).toFixed(1)}/${((Date.now() - t0) / 1000).toFixed(1)}`;
      outputs.push(run.stdout, run.stderr);
      const message = messageOf(run);
      row.code = run.code;
      row.message =
        message
          .split("\n")
          .find((l) => l.trim())
          ?.trim() ?? "";
      row.unchanged = JSON.stringify(before) === JSON.stringify(after) ? "yes" : "NO";
      assert.equal(
        run.code,
        c.expect,
        `exit code; stdout: ${run.stdout.slice(-1500)} stderr: ${run.stderr.slice(-1500)}`,
      );
      assert.match(message, c.message);
      assert.doesNotMatch(run.stdout + run.stderr, /\n\s+at .+:\d+:\d+\)?\n/, "no stack trace");
      c.check?.(run);
      assert.deepEqual(after, before, "the run changed the stack state, the machines or the etcd members");
      row.passed = true;
    });
  }

  const rollout = ["rollout", "--stack", STACK, "--yes", "--json"];
  const conf = (mut: (c: Conf) => void, image?: string): Conf => {
    const c = goodConf(image);
    mut(c);
    return c;
  };

  before(async function () {
    this.timeout(300_000);
    suite = cliSuite("molt-bad-input-", STACK, lab);
    env = suite.env;
    writeConf(STACK, goodConf());
    writeConf(
      GHOST,
      conf((c) => ((c["molt:lab"] as Conf).name = "t5ghost")),
    );
    const run = await runCli(rollout, env);
    outputs.push(run.stdout, run.stderr);
    assert.equal(run.code, 0, `creating the cluster: ${run.stderr.slice(-2000)} ${run.stdout.slice(-2000)}`);
    assert.equal(summaryOf(run).result, "succeeded");
    const st = await suite.stored();
    key = st.sshPrivateKey!;
    endpoints = st.endpoints;
    assert.equal(endpoints.length, 3);
    await waitHealthy();
  });

  after(async function () {
    this.timeout(300_000);
    const w = (s: string) => console.log("    " + s);
    w("");
    w("bad-input matrix:");
    w(
      `${"case".padEnd(58)} ${"exit".padEnd(5)} ${"want".padEnd(5)} ${"unchanged".padEnd(9)} ${"pass".padEnd(5)} ` +
        `${"run/case s".padEnd(11)} message`,
    );
    for (const r of rows)
      w(
        `${r.name.slice(0, 58).padEnd(58)} ${String(r.code).padEnd(5)} ${String(r.expected).padEnd(5)} ` +
          `${r.unchanged.padEnd(9)} ${(r.passed ? "yes" : "NO").padEnd(5)} ${(r.secs ?? "-").padEnd(11)} ` +
          `${r.message.slice(0, 150)}`,
      );
    w(
      `${"Kubernetes downgrade / skip-level".padEnd(58)} ${"-".padEnd(5)} ${"2".padEnd(5)} ${"-".padEnd(9)} ` +
        `${"n/a".padEnd(5)} ${"-".padEnd(11)} not run here: the etcd-only images carry no Kubernetes version and ` +
        `one etcd (3.4.23); a downgrade is covered by test/e2e/kube.test.ts; a skip-level cannot be built ` +
        `(only 1.36 and 1.37 exist)`,
    );
    await closeFingerprints();
    w(`suite wall time ${((Date.now() - started) / 1000).toFixed(0)} s`);
    await suite.teardown();
  });

  // ---- configuration (the live stack's own file) ----
  badCase({
    name: "config: even replicas (2)",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:replicas"] = 2)),
    message: /molt:replicas: an odd number.*\(got 2\)/,
  });
  badCase({
    name: "config: replicas 0",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:replicas"] = 0)),
    message: /molt:replicas: at least 1/,
  });
  badCase({
    name: "config: replicas not a number",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:replicas"] = "three")),
    message: /molt:replicas: a number.*"three"/,
  });
  badCase({
    name: "config: maxSurge 0 with 1 replica",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:replicas"] = 1), ((c["molt:rollout"] as Conf).maxSurge = 0))),
    message: /maxSurge: 0 .*needs at least 3 replicas.*use maxSurge 1/,
  });
  badCase({
    name: "config: maxSurge 2",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:rollout"] as Conf).maxSurge = 2)),
    message: /molt:rollout\.maxSurge: 0 or 1/,
  });
  badCase({
    name: "config: maxUnavailable 1",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:rollout"] as Conf).maxUnavailable = 1)),
    message: /molt:rollout\.maxUnavailable: 0: molt never takes a member away/,
  });
  badCase({
    name: "config: onFailure retry",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:rollout"] as Conf).onFailure = "retry")),
    message: /molt:rollout\.onFailure.*"rollback"\|"pause"|molt:rollout\.onFailure.*rollback.*pause/,
  });
  badCase({
    name: "config: unknown provider gcp",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:provider"] = "gcp")),
    message: /molt:provider: one of lab, aws, azure, vsphere \(got "gcp"\)/,
  });
  badCase({
    name: "config: misspelt key molt:imag",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:imag"] = c["molt:image"]), delete c["molt:image"])),
    message: /molt:imag: not a molt setting \(known: .*molt:image/,
  });
  badCase({
    name: "config: misspelt nested key maxSurg",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:rollout"] = { maxSurg: 1 })),
    message: /molt:rollout: .*maxSurg/,
  });
  badCase({
    name: "config: missing molt:image",
    args: rollout,
    expect: 2,
    conf: conf((c) => delete c["molt:image"]),
    message: /molt:image: /,
    check: (r) => assert.match(messageOf(r), /nothing was changed/),
  });
  badCase({
    name: "config: lab image that does not exist",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v9"),
    message:
      /lab image "lab-v9" does not exist in .*\(have: .*lab-v1.*lab-v2.*\); build images with tools\/lab\/build-images\.sh/,
  });
  badCase({
    name: "config: kubernetesVersion on an etcd-only image",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:kubernetesVersion"] = "1.36.3")),
    message: /lab image "lab-v1" runs etcd only.*remove the key or use a k8s-\* image/,
  });
  badCase({
    name: "config: kubernetesVersion not the image's",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:kubernetesVersion"] = "1.36.3"), "k8s-v1.37.2"),
    message:
      /molt:kubernetesVersion: 1\.36\.3 does not match lab image "k8s-v1\.37\.2", which carries Kubernetes 1\.37\.2; remove the key .* or pick the image of 1\.36\.3/,
  });
  badCase({
    name: "config: kubernetesVersion not a version (1.36)",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:kubernetesVersion"] = "1.36")),
    message: /molt:kubernetesVersion: a full version such as/,
  });
  badCase({
    name: "config: malformed YAML",
    args: rollout,
    expect: 2,
    conf: "config:\n  molt:provider: lab\n   molt:replicas: [3\n",
    message: /not valid YAML: /,
  });
  badCase({
    name: "config: file without a config: map",
    args: rollout,
    expect: 2,
    conf: "molt:provider: lab\n",
    message: /it has no `config:` map/,
  });
  badCase({
    name: "config: SSH private key given on a lab stack",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:ssh"] = { privateKey: { secure: "AAAA" } })),
    message: /molt:ssh: the lab makes its own client key/,
  });
  badCase({
    name: "config: lab subnet 10.77.300.0/24",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:lab"] as Conf).subnet = "10.77.300.0/24")),
    message: /molt:lab\.subnet: an IPv4 \/24 such as 10\.77\.0\.0\/24/,
  });
  badCase({
    name: "config: joinSeconds 5",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:timeouts"] as Conf).joinSeconds = 5)),
    message: /molt:timeouts\.joinSeconds: .*10/,
  });
  badCase({
    name: "config: molt:lock.in etcd",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:lock"] = { in: "etcd" })),
    message: /molt:lock\.in: "backend" \(a lease beside the state.*or "cluster"/,
  });
  badCase({
    name: "config: molt:lock.in backend on a backend molt cannot write to (gs://)",
    args: rollout,
    expect: 2,
    conf: conf((c) => (c["molt:lock"] = { in: "backend" }), "lab-v2"),
    env: { PULUMI_BACKEND_URL: "gs://molt-state-nowhere" },
    message: /molt:lock\.in is "backend", but molt cannot keep a lease in this backend.*set molt:lock\.in to "cluster"/,
  });
  badCase({
    name: "config: bridge name too long",
    args: rollout,
    expect: 2,
    conf: conf((c) => ((c["molt:lab"] as Conf).bridge = "a-bridge-name-too-long")),
    message: /molt:lab\.bridge: a Linux interface name of at most 15 characters/,
  });

  // ---- stacks and the command line ----
  badCase({
    name: "stack: config file missing (--stack nosuch)",
    args: ["rollout", "--stack", "nosuch", "--yes", "--json"],
    expect: 2,
    message: /no such file: create .*Pulumi\.nosuch\.yaml with at least molt:provider, molt:replicas and molt:image/,
  });
  badCase({
    name: "stack: name with invalid characters",
    args: ["rollout", "--stack", "bi/../x", "--yes"],
    expect: 2,
    message: /stack name "bi\/\.\.\/x" may only contain letters, digits/,
  });
  badCase({
    name: "status of a stack that does not exist",
    args: ["status", "--stack", GHOST],
    expect: 0,
    message: /stack ghost \(not created yet\)[^]*next operation: create-first/,
    check: (r) => assert.doesNotMatch(r.stdout + r.stderr, /error/i),
  });
  badCase({
    name: "plan --json of a stack that does not exist",
    args: ["plan", "--stack", GHOST, "--json"],
    expect: 0,
    message: /"exists": false/,
    check: (r) => assert.equal((JSON.parse(r.stdout) as { next: { kind: string } }).next.kind, "create-first"),
  });
  badCase({
    name: "cli: unknown command",
    args: ["frobnicate", "--stack", STACK],
    expect: 2,
    message: /unknown command 'frobnicate'[^]*molt --help/,
  });
  badCase({
    name: "cli: unknown flag",
    args: ["rollout", "--stack", STACK, "--yes", "--force"],
    expect: 2,
    message: /unknown option '--force'[^]*--help/,
  });
  badCase({
    name: "cli: unknown flag with --json (JSON error)",
    args: [...rollout, "--force"],
    expect: 2,
    message: /unknown option '--force'.*--help/,
    check: (r) => assert.equal(r.events[0]?.type, "error"),
  });
  badCase({
    name: "cli: --on-failure maybe",
    args: [...rollout, "--on-failure", "maybe"],
    expect: 2,
    message: /argument 'maybe' is invalid\. Allowed choices are rollback, pause/,
  });
  // ---- operator controls (issue #18; their config rows are in test/unit/controls.test.ts) ----
  badCase({
    name: "cli: --max-replacements 0",
    args: [...rollout, "--max-replacements", "0"],
    expect: 2,
    message: /--max-replacements.*"0" is not a whole number of at least 1/,
  });
  badCase({
    name: "cli: --metrics-file in a missing directory",
    args: [...rollout, "--metrics-file", "/nonexistent-molt/textfile/molt.prom"],
    expect: 2,
    message: /--metrics-file .*does not exist or is not writable.*nothing was changed/,
  });
  badCase({
    name: "rollout outside the maintenance window",
    args: rollout,
    expect: 8,
    // A window only tomorrow (UTC): now is outside it.
    conf: conf((c) => {
      const tomorrow = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"][(new Date().getUTCDay() + 1) % 7];
      (c["molt:rollout"] as Conf).window = { days: [tomorrow], start: "00:00", end: "24:00", timeZone: "UTC" };
    }, "lab-v2"),
    message: /outside the maintenance window.*Nothing was changed/,
  });
  badCase({
    name: "cli: --stack missing",
    args: ["status"],
    expect: 2,
    message: /required option '-s, --stack <name>' not specified/,
  });
  badCase({
    name: "cli: rollout without --yes, stdin not a terminal",
    args: ["rollout", "--stack", STACK],
    expect: 6,
    conf: goodConf("lab-v2"),
    message: /not confirmed: run with --yes.*nothing was changed/,
  });
  badCase({
    name: "cli: rollout --json without --yes",
    args: ["rollout", "--stack", STACK, "--json"],
    expect: 6,
    conf: goodConf("lab-v2"),
    message: /not confirmed: run with --yes/,
  });

  // ---- environment ----
  badCase({
    name: "env: PULUMI_BACKEND_URL with an unknown scheme",
    args: ["status", "--stack", STACK],
    expect: 2,
    env: { PULUMI_BACKEND_URL: "nosuch://bucket" },
    message: /cannot open the Pulumi backend nosuch:\/\/bucket: .*Set PULUMI_BACKEND_URL/,
  });
  badCase({
    name: "env: PULUMI_BACKEND_URL folder does not exist (rollout)",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v2"),
    env: { PULUMI_BACKEND_URL: "file:///nonexistent/molt-state" },
    message: /cannot open the Pulumi backend file:\/\/\/nonexistent\/molt-state: the folder .* does not exist/,
    check: () => assert.ok(!existsSync("/nonexistent"), "the backend folder was not created"),
  });
  badCase({
    name: "env: MOLT_PULUMI is not an engine",
    args: ["status", "--stack", STACK],
    expect: 2,
    env: { MOLT_PULUMI: "/bin/true" },
    message: /MOLT_PULUMI=\/bin\/true is not a usable Pulumi engine.*unset it/,
  });
  badCase({
    name: "env: wrong passphrase (status)",
    args: ["status", "--stack", STACK],
    expect: 2,
    env: { PULUMI_CONFIG_PASSPHRASE: "not-the-passphrase" },
    message: /passphrase does not decrypt the secrets of stack "bi".*PULUMI_CONFIG_PASSPHRASE/,
  });
  badCase({
    name: "env: wrong passphrase (rollout)",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v2"),
    env: { PULUMI_CONFIG_PASSPHRASE: "not-the-passphrase" },
    message: /passphrase does not decrypt.*PULUMI_CONFIG_PASSPHRASE/,
  });

  // ---- stored state ----
  const corrupt = (edit: (molt: { nodes: { name: string }[]; endpoints: unknown[] }) => void) => {
    let saved = "";
    return {
      setup: () => {
        saved = readFileSync(stackFile(), "utf8");
        const doc = JSON.parse(saved) as {
          checkpoint: {
            latest: {
              resources: { type: string; outputs: { molt: { nodes: { name: string }[]; endpoints: unknown[] } } }[];
            };
          };
        };
        edit(doc.checkpoint.latest.resources.find((r) => r.type === "pulumi:pulumi:Stack")!.outputs.molt);
        writeFileSync(stackFile(), JSON.stringify(doc, null, 4));
      },
      restore: () => writeFileSync(stackFile(), saved),
    };
  };
  badCase({
    name: "state: duplicate node names",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v2"),
    ...corrupt((m) => (m.nodes[1].name = m.nodes[0].name)),
    message: /node list stored in stack "bi" is not valid \(duplicate node names\); nothing was changed/,
  });
  badCase({
    name: "state: an endpoint missing",
    args: ["status", "--stack", STACK],
    expect: 2,
    ...corrupt((m) => m.endpoints.pop()),
    message: /not valid \(endpoints do not match nodes\).*will not guess/,
  });

  // ---- broken nodes (the config asks for lab-v2, so a rollout has work it must refuse) ----
  let nodeB = "";
  badCase({
    name: "node: stored SSH key no longer authorized on one node",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v2"),
    setup: () => {
      nodeB = endpoints[1].name;
      renameSync(
        join(machineRoot(nodeB), "root/.ssh/authorized_keys"),
        join(machineRoot(nodeB), "root/.ssh/authorized_keys.off"),
      );
    },
    restore: async () => {
      renameSync(
        join(machineRoot(nodeB), "root/.ssh/authorized_keys.off"),
        join(machineRoot(nodeB), "root/.ssh/authorized_keys"),
      );
      await waitHealthy();
    },
    message: /EtcdMemberHealthy: etcd member of .* is not healthy \(unreachable over SSH: .*authentication/i,
  });
  let downIf = "";
  badCase({
    name: "node: unreachable (its link down)",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v2"),
    setup: () => {
      downIf = ifaceName("h", endpoints[2].name);
      execFileSync("ip", ["link", "set", downIf, "down"]);
    },
    restore: async () => {
      execFileSync("ip", ["link", "set", downIf, "up"]);
      await waitHealthy();
    },
    message:
      /etcd member of .* is not healthy.*Recover it|etcd cannot be observed|no agreed leader|do not agree on a leader/,
  });
  let alarmAccess: EtcdAccess | undefined;
  let alarmMember = "";
  badCase({
    name: "etcd: active NOSPACE alarm",
    args: rollout,
    expect: 2,
    conf: goodConf("lab-v2"),
    setup: async () => {
      alarmAccess = await EtcdAccess.open(endpoints, { user: "root", privateKey: key });
      const n = alarmAccess.nodes()[0];
      alarmMember = (await alarmAccess.status(n)).memberId;
      await alarmAccess
        .endpoint(n)
        .maintenance.alarm({ action: "Activate", memberID: alarmMember, alarm: "Nospace" } as never);
      assert.equal((await alarmAccess.alarms(n)).length, 1, "the alarm is active");
    },
    restore: async () => {
      const n = alarmAccess!.nodes()[0];
      await alarmAccess!
        .endpoint(n)
        .maintenance.alarm({ action: "Deactivate", memberID: alarmMember, alarm: "Nospace" } as never);
      assert.equal((await alarmAccess!.alarms(n)).length, 0, "the alarm is cleared");
      await alarmAccess!.close();
    },
    message: /EtcdClusterHealthy: etcd has active alarms: NOSPACE on member \d+; resolve them/,
  });

  // ---- one run at a time ----
  let second: CliRun | undefined;
  badCase({
    name: "lock: a second run while one runs",
    args: rollout,
    expect: 3,
    run: async () => {
      // The first run is stopped (SIGSTOP) once it holds the lock: a live run, mid-way.
      let stopped!: () => void;
      const holding = new Promise<void>((r) => (stopped = r));
      const first = startCli(rollout, env, (e) => {
        if (e.type !== "start") return;
        const pid = first.child.pid!;
        const hold = async () => {
          process.kill(pid, "SIGSTOP");
          const lease = await readLease(new FileStore(stateDir()), STACK).catch(() => undefined);
          if (lease?.holder.pid === pid) return stopped();
          process.kill(pid, "SIGCONT");
          setTimeout(() => void hold(), 20);
        };
        void hold(); // polls on its own timer; `holding` says when the lease is held
      });
      await holding;
      try {
        second = await runCli(rollout, env);
      } finally {
        process.kill(first.child.pid!, "SIGCONT");
      }
      const one = await first.done;
      outputs.push(one.stdout, one.stderr);
      assert.equal(one.code, 0, `the first run: ${one.stderr.slice(-500)}`);
      assert.equal(summaryOf(one).result, "noop");
      return second;
    },
    message: /another molt run holds stack "bi" \(pid \d+ on .*\); nothing was changed\. Wait for it to finish/,
  });
  let planted: string | undefined;
  badCase({
    name: "lock: held by a run on another host",
    args: rollout,
    expect: 3,
    setup: async () => {
      // A live lease of a runner elsewhere (renewed just now).
      const holder = {
        pid: 4242,
        host: `not-${hostname()}`,
        runId: "0a0a0a0a-run-on-another-host",
        startedAt: new Date().toISOString(),
        command: "rollout",
        machine: "another-machine",
        engineBound: true,
      };
      const body = { kind: "molt-lease", holder, ttlSeconds: 300, renewedAt: new Date().toISOString() };
      planted = await new FileStore(stateDir()).putIfAbsent(lockKey(STACK), Buffer.from(JSON.stringify(body)));
      assert.ok(planted, "the lease was planted");
    },
    restore: async () => void (await new FileStore(stateDir()).delete(lockKey(STACK), planted!)),
    message:
      /another molt run holds stack "bi" \(pid 4242 on not-.*run 0a0a0a0a-run-on-another-host.*lease expires in \d+s \(300s after its last renewal\)/,
  });

  // ---- security ----
  describe("security", () => {
    it("a replaced host key is refused by status and rollout, and nothing changes", async function () {
      const node = endpoints[1];
      const sshDir = join(machineRoot(node.name), "etc/ssh");
      const keyFile = join(sshDir, "ssh_host_ed25519_key");
      const saved = { priv: readFileSync(keyFile), pub: readFileSync(keyFile + ".pub") };
      const tmp = mkdtempSync(join(tmpdir(), "molt-hostkey-"));
      const hupSshd = () => {
        const pids = execFileSync("ip", ["netns", "pids", netnsName(lab.lab, node.name)], { encoding: "utf8" })
          .split(/\s+/)
          .filter(Boolean);
        const listener = pids.filter((p) => {
          try {
            const cmd = readFileSync(`/proc/${p}/cmdline`, "utf8");
            return /sshd/.test(cmd) && / ?-D/.test(cmd.replace(/\0/g, " ")) && !/session|priv|net/.test(cmd);
          } catch {
            return false;
          }
        });
        assert.equal(listener.length, 1, `one sshd listener in ${node.name}: ${listener}`);
        process.kill(Number(listener[0]), "SIGHUP");
      };
      /** Polls until the node's sshd serves the key (a connection pinned to it succeeds). */
      const waitServes = async (hostKey: string) => {
        const until = Date.now() + 30_000;
        for (;;) {
          try {
            const s = await SshSession.connect(
              { host: node.sshHost, port: node.sshPort, user: "root", privateKey: key, hostKey },
              { readyTimeoutMs: 5_000 },
            );
            s.close();
            return;
          } catch (e) {
            if (Date.now() > until) throw e;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
      };
      execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "impostor", "-f", join(tmp, "k")]);
      const newPub = readFileSync(join(tmp, "k.pub"), "utf8").trim();
      const results: CliRun[] = [];
      let before: Fingerprint | undefined;
      let after: Fingerprint | undefined;
      try {
        copyFileSync(join(tmp, "k"), keyFile);
        copyFileSync(join(tmp, "k.pub"), keyFile + ".pub");
        hupSshd();
        await waitServes(newPub);
        // The pinned key is refused by molt's SSH edge.
        await assert.rejects(
          SshSession.connect({
            host: node.sshHost,
            port: node.sshPort,
            user: "root",
            privateKey: key,
            hostKey: node.hostPublicKey,
          }),
          HostKeyMismatchError,
        );
        before = await fp();
        writeConf(STACK, goodConf("lab-v2"));
        results.push(await runCli(["status", "--stack", STACK, "--json"], env));
        results.push(await runCli(rollout, env));
        after = await fp();
      } finally {
        writeConf(STACK, goodConf());
        writeFileSync(keyFile, saved.priv, { mode: 0o600 });
        writeFileSync(keyFile + ".pub", saved.pub);
        rmSync(tmp, { recursive: true, force: true });
        hupSshd();
        await waitServes(node.hostPublicKey);
        await waitHealthy();
      }
      for (const r of results) outputs.push(r.stdout, r.stderr);
      const [status, roll] = results;
      const row = (name: string, r: CliRun, want: number, ok: boolean) =>
        rows.push({
          name,
          code: r.code,
          expected: want,
          message: messageOf(r).split("\n")[0],
          unchanged: JSON.stringify(before) === JSON.stringify(after) ? "yes" : "NO",
          passed: ok,
        });
      const statusDoc = JSON.parse(status.stdout) as {
        conditions: { type: string; status: string; reason: string }[];
        nodes: { name: string; member?: { healthy: boolean } }[];
      };
      const statusOk =
        status.code === 0 &&
        statusDoc.nodes.find((n) => n.name === node.name)?.member?.healthy === false &&
        /host key of .* does not match the pinned key/.test(status.stdout);
      row("security: status with a replaced host key (reports, exit 0)", status, 0, statusOk);
      const rollOk = roll.code === 2 && /host key of .* does not match the pinned key/.test(messageOf(roll));
      row("security: rollout with a replaced host key", roll, 2, rollOk);
      assert.equal(status.code, 0, status.stderr);
      assert.ok(statusOk, `status names the host-key refusal for ${node.name}: ${status.stdout.slice(0, 3000)}`);
      assert.equal(roll.code, 2, roll.stdout.slice(-2000));
      assert.equal(summaryOf(roll).result, "refused");
      assert.match(messageOf(roll), /host key of .* does not match the pinned key: refusing to connect/);
      assert.deepEqual(after, before, "nothing changed");
    });

    it(
      "etcd is reachable from outside a machine only through the tunnel (and demands a client " + "certificate)",
      async function () {
        const tcp = (host: string, port: number) =>
          new Promise<boolean>((resolve) => {
            const s = netConnect({ host, port, timeout: 2_000 });
            s.once("connect", () => (s.destroy(), resolve(true)));
            s.once("timeout", () => (s.destroy(), resolve(false)));
            s.once("error", () => resolve(false));
          });
        /** A TLS client without a certificate asks for /version: etcd must not answer. */
        const noCertAnswer = (host: string) =>
          new Promise<string>((resolve) => {
            let got = "";
            const s = tlsConnect(
              { host, port: 2379, rejectUnauthorized: false, servername: "localhost", timeout: 5_000 },
              () => s.write(`GET /version HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
            );
            s.on("data", (d: Buffer) => (got += d.toString()));
            s.once("timeout", () => (s.destroy(), resolve(got)));
            s.once("error", () => resolve(got));
            s.once("close", () => resolve(got));
          });
        const findings: string[] = [];
        for (const e of endpoints) {
          const client = await tcp(e.privateAddress, 2379);
          const peer = await tcp(e.privateAddress, 2380);
          findings.push(
            `${e.name} ${e.privateAddress}: 2379 ${client ? "REACHABLE" : "closed"}, 2380 ` +
              `${peer ? "REACHABLE" : "closed"} from the host`,
          );
          assert.ok(!client && !peer, `etcd on ${e.name} is reachable from the host: 2379 ${client}, 2380 ${peer}`);
          if (client)
            assert.doesNotMatch(
              await noCertAnswer(e.privateAddress),
              /HTTP\/1\.[01] 200|etcdserver/,
              `etcd on ${e.name} answered a client without a certificate`,
            );
        }
        console.log("    etcd ports seen from the host:\n      " + findings.join("\n      "));
        // The loopback listener the tunnels use is there on every node (molt's only way in).
        for (const e of endpoints) {
          const ss = execFileSync("ip", ["netns", "exec", netnsName(lab.lab, e.name), "ss", "-ltnH", "sport = :2379"], {
            encoding: "utf8",
          });
          assert.match(ss, /127\.0\.0\.1:2379/, `${e.name} serves etcd on loopback`);
        }
      },
    );

    it("no secret appears in any output, event, log or file molt or the engine wrote", async function () {
      assert.ok(
        rows.length >= 30 && outputs.length >= 60,
        `the outputs of every case were collected (${rows.length} cases, ${outputs.length} outputs)`,
      );
      const body = (pem: string) =>
        pem
          .split("\n")
          .filter((l) => l && !l.startsWith("-----"))
          .join("");
      const node = endpoints[0];
      const ssh = await SshSession.connect({
        host: node.sshHost,
        port: node.sshPort,
        user: "root",
        privateKey: key,
        hostKey: node.hostPublicKey,
      });
      const caKey = await ssh.run("cat /etc/kubernetes/pki/etcd/ca.key", "read the etcd CA key");
      ssh.close();
      const secrets: Record<string, string> = {
        "SSH client private key": body(key),
        "etcd CA key": body(caKey),
        "SSH host private key": body(
          readFileSync(join(machineRoot(node.name), "etc/ssh/ssh_host_ed25519_key"), "utf8"),
        ),
      };
      const files: string[] = [];
      const walk = (d: string) => {
        for (const f of readdirSync(d)) {
          const p = join(d, f);
          if (p === join(suite.wd.dir, "node_modules")) continue;
          const st = statSync(p);
          if (st.isDirectory()) walk(p);
          else if (st.isFile() && f !== "passphrase") files.push(p);
        }
      };
      walk(suite.wd.dir);
      const pulumiLogs = join(homedir(), ".pulumi", "logs");
      if (existsSync(pulumiLogs)) walk(pulumiLogs);
      assert.ok(
        files.some((f) => f.endsWith(`${STACK}.json`)),
        "the state file was scanned",
      );
      const flat = (s: string) => s.replace(/\\n|\s/g, "");
      const haystacks: [string, string][] = [
        ["CLI output", flat(outputs.join("\n"))],
        ...files.map((f): [string, string] => [f, flat(readFileSync(f).toString("latin1"))]),
      ];
      const leaks: string[] = [];
      for (const [what, b] of Object.entries(secrets)) {
        assert.ok(b.length > 40, `${what} read`);
        const probe = b.slice(8, 48);
        for (const [where, text] of haystacks) if (text.includes(probe)) leaks.push(`${what} in ${where}`);
      }
      console.log(`    scanned the CLI output of ${rows.length} cases and ${files.length} files for 3 secrets`);
      assert.deepEqual(leaks, []);
    });
  });
});
