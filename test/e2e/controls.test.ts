// Operator controls (issue #18) end to end on the lab (t23, etcd-only images), through the
// CLI a user runs, on one cluster rolled step by step: a postJoin hook that checks the new
// node over the ssh_config molt hands it, --max-replacements, a metrics file read back by a
// Prometheus text parser, a webhook receiver, a maintenance window that closes mid-run
// (during a soak), a failing postJoin hook rolled back, a failing webhook that does not fail
// the run, and a node whose etcd certificate is re-issued to expire soon being replaced.
import * as assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { SshSession } from "../../infra/remote/ssh";
import { inspect } from "../../orchestrator/inspect";
import { runCli, summaryOf, type CliRun } from "../support/cli";
import { cliSuite, type CliSuite } from "../support/cli-suite";
import { labStackYaml, testLab } from "../support/lab";
import { longOnly } from "../support/long";
import { parse, stringify } from "yaml";

const lab = testLab(23);
const STACK = "ctl";

/** Checks the new node's own etcd over the ssh_config molt gives the hook (an etcd-only lab node has no API server). */
const CHECK_NODE =
  'ssh -F "$MOLT_SSH_CONFIG" "$MOLT_NODE" ' +
  "'ETCDCTL_API=3 /usr/local/bin/etcdctl --endpoints=https://127.0.0.1:2379 " +
  "--cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/healthcheck-client.crt " +
  "--key=/etc/kubernetes/pki/etcd/healthcheck-client.key endpoint health' && " +
  'test ! -r "$PULUMI_CONFIG_PASSPHRASE_FILE" && echo "checked $MOLT_NODE at $MOLT_NODE_ADDRESS"';

describe("operator controls on the lab (e2e, lab t23)", function () {
  let suite: CliSuite;
  let env: Record<string, string>;
  const figures: Record<string, number> = {};
  let hooks: { status: number; events: { event: { type: string; result?: string; operation?: { kind: string } } }[] };
  let server: Server;
  let hookUrl = "";

  const conf = (image: string, extra: Record<string, unknown> = {}): string => {
    const doc = parse(labStackYaml(lab, { image, joinSeconds: 90, settleSeconds: 30 })) as {
      config: Record<string, unknown>;
    };
    for (const [k, v] of Object.entries(extra))
      doc.config[k] = k === "molt:rollout" ? { ...(doc.config[k] as object), ...(v as object) } : v;
    return stringify(doc);
  };
  const rollout = async (name: string, ...extra: string[]): Promise<CliRun> => {
    const t = Date.now();
    const run = await runCli(["rollout", "--stack", STACK, "--yes", "--json", ...extra], env);
    figures[name] = Math.round((Date.now() - t) / 100) / 10;
    return run;
  };
  const nodes = async () => (await inspect({ stack: STACK, workDir: suite.wd.dir, env })).nodes;
  const replacedBy = (run: CliRun) => summaryOf(run).replaced;

  before(async () => {
    suite = cliSuite("molt-controls-", STACK, lab);
    env = suite.env;
    hooks = { status: 200, events: [] };
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        if (hooks.status === 200) hooks.events.push(JSON.parse(body));
        res.writeHead(hooks.status).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/molt`;
  });
  after(async function () {
    this.timeout(300_000);
    console.log("    controls figures (s):", JSON.stringify(figures));
    server.close();
    await suite.teardown();
  });

  it("creates a 3-node cluster on lab-v1", async () => {
    suite.wd.writeStackConfig(STACK, conf("lab-v1"));
    const run = await rollout("create");
    assert.equal(run.code, 0, run.stderr + run.stdout.slice(-2000));
  });

  it(
    "--max-replacements 1 with a postJoin hook that checks the new node: paused after one node; metrics parse; " +
      "the webhook hears start, pause and summary",
    async () => {
      suite.wd.writeStackConfig(
        STACK,
        conf("lab-v2", { "molt:hooks": { postJoin: { command: CHECK_NODE, timeoutSeconds: 60 } } }),
      );
      const metrics = join(suite.wd.dir, "molt.prom");
      const run = await rollout(
        "maxReplacements1",
        "--max-replacements",
        "1",
        "--metrics-file",
        metrics,
        "--notify",
        hookUrl,
      );
      assert.equal(run.code, 5, run.stderr + run.stdout.slice(-3000));
      const s = summaryOf(run);
      assert.equal(s.result, "paused");
      assert.match(String(s.reason), /--max-replacements 1/);
      assert.deepEqual(replacedBy(run), ["ctl-cp-1"]);
      // The hook ran for the new node, passed, and its output is in the events.
      const hook = run.events.find((e) => e.type === "hook") as { ok: boolean; node: string; output: string };
      assert.ok(hook?.ok, JSON.stringify(hook));
      assert.equal(hook.node, "ctl-cp-4");
      assert.match(hook.output, /is healthy/);
      const prefix = lab.subnet.split(".").slice(0, 3).join(".");
      assert.ok(hook.output.includes(`checked ctl-cp-4 at ${prefix}.`), hook.output);
      // Stopped at rest: 3 healthy voters, one of them new.
      const n = await nodes();
      assert.deepEqual(
        n.map((x) => `${x.name}:${x.image}`),
        ["ctl-cp-2:lab-v1", "ctl-cp-3:lab-v1", "ctl-cp-4:lab-v2"],
      );
      assert.ok(n.every((x) => x.member && !x.member.learner && x.member.healthy));
      // The metrics file, read by a Prometheus text parser.
      const families = new Map(parsePrometheusTextFormat(readFileSync(metrics, "utf8")).map((f) => [f.name, f]));
      const result = families.get("molt_rollout_result")!.metrics.find((m) => m.value === "1");
      assert.equal(result?.labels?.result, "paused");
      assert.equal(families.get("molt_rollout_nodes_replaced")!.metrics[0].value, "1");
      const provision = families
        .get("molt_rollout_phase_duration_seconds")!
        .metrics.find((m) => m.labels?.phase === "provision");
      assert.ok(Number(provision?.value) > 1, `provision took ${provision?.value}s`);
      assert.ok(!families.has("molt_rollout_last_success_timestamp_seconds"), "no success yet");
      // The webhook: the start, the pause decision, the summary.
      assert.deepEqual(
        hooks.events.map((e) => e.event.type + (e.event.operation ? `:${e.event.operation.kind}` : "")),
        ["start", "decision:pause", "summary"],
      );
      // `status` shows how far the roll is.
      const status = await runCli(["status", "--stack", STACK], env);
      assert.match(status.stdout, /rollout: 1\/3 nodes up to date; 2 to replace \(ctl-cp-2, ctl-cp-3\)/);
    },
  );

  it("a window that closes mid-run (during the new node's soak) stops at the next boundary, paused", async () => {
    suite.wd.writeStackConfig(
      STACK,
      conf("lab-v2", {
        "molt:rollout": { soakSeconds: 15, window: { start: "00:00", end: "04:00", timeZone: "UTC" } },
      }),
    );
    // Test-only clock: the run starts 10 s before the window closes.
    const run = await runCli(["rollout", "--stack", STACK, "--yes", "--json"], {
      ...env,
      MOLT_TEST_CLOCK_START: "2026-12-01T03:59:50Z",
    });
    assert.equal(run.code, 5, run.stderr + run.stdout.slice(-3000));
    const s = summaryOf(run);
    assert.match(String(s.reason), /maintenance window \(every day 00:00-04:00 UTC\) is closed/);
    // The replacement in progress was finished: its new node soaked, the old node retired.
    assert.deepEqual(replacedBy(run), ["ctl-cp-2"]);
    const soaks = run.events.filter(
      (e) => e.type === "decision" && (e.operation as { key?: string }).key === "soak:ctl-cp-5",
    );
    assert.ok(soaks.length > 3, `soaked ctl-cp-5 (${soaks.length} passes)`);
    const n = await nodes();
    assert.deepEqual(
      n.map((x) => `${x.name}:${x.image}`),
      ["ctl-cp-3:lab-v1", "ctl-cp-4:lab-v2", "ctl-cp-5:lab-v2"],
    );
    assert.ok(
      n.every((x) => x.member && !x.member.learner && x.member.healthy),
      "no learner, all healthy",
    );
  });

  it("a failing postJoin hook rolls the new node back; the old nodes are intact", async () => {
    suite.wd.writeStackConfig(
      STACK,
      conf("lab-v2", { "molt:hooks": { postJoin: { command: 'echo "not accepting $MOLT_NODE" >&2; exit 3' } } }),
    );
    const run = await rollout("postJoinFails");
    assert.equal(run.code, 4, run.stderr + run.stdout.slice(-3000));
    // The reason says how the hook failed; what it printed is in its own event (molt:notify.includeHookOutput).
    const reason = String(summaryOf(run).reason);
    assert.match(reason, /postJoin hook failed for new node ctl-cp-6 \(its command exited 3\)/);
    assert.ok(!reason.includes("not accepting"), reason);
    const hook = run.events.find((e) => e.type === "hook") as { output: string };
    assert.equal(hook.output, "not accepting ctl-cp-6");
    const n = await nodes();
    assert.deepEqual(
      n.map((x) => `${x.name}:${x.image}`),
      ["ctl-cp-3:lab-v1", "ctl-cp-4:lab-v2", "ctl-cp-5:lab-v2"],
    );
    assert.ok(n.every((x) => x.member && !x.member.learner && x.member.healthy));
    const i = await inspect({ stack: STACK, workDir: suite.wd.dir, env });
    assert.equal(i.members.length, 3, "the new node's member went with it");
  });

  it("a failing webhook does not fail the run: it converges, and says the webhook failed", async () => {
    suite.wd.writeStackConfig(STACK, conf("lab-v2"));
    hooks.status = 500;
    const run = await rollout("failingWebhook", "--notify", hookUrl);
    hooks.status = 200;
    assert.equal(run.code, 0, run.stderr + run.stdout.slice(-3000));
    assert.equal(summaryOf(run).result, "succeeded");
    // With --json a warning event, before the summary (the last line).
    const warning = run.events.find((e) => e.type === "warning") as { message: string };
    assert.match(
      warning.message,
      /webhook http:\/\/127\.0\.0\.1:\d+\/molt: the start event was not delivered \(HTTP 500\)/,
    );
    assert.equal(run.events.at(-1)?.type, "summary");
    assert.ok((await nodes()).every((x) => x.image === "lab-v2"));
  });

  // npm run test:long only (test/support/long.ts): CI's time budget.
  longOnly(() => {
    it("a node whose etcd certificate expires within the days is replaced; plan says why", async () => {
      const st = await suite.stored();
      const victim = st.endpoints.find((e) => e.name === "ctl-cp-5")!;
      const ssh = await SshSession.connect({
        host: victim.sshHost,
        port: victim.sshPort,
        user: "root",
        privateKey: st.sshPrivateKey!,
        hostKey: victim.hostPublicKey,
      });
      try {
        // Re-issued from the same key, names and CA, valid for 2 days: etcd keeps serving.
        await ssh.run(
          "set -e; cd /etc/kubernetes/pki/etcd; " +
            "openssl x509 -x509toreq -in server.crt -signkey server.key -copy_extensions copy -out /tmp/server.csr; " +
            "openssl x509 -req -in /tmp/server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 " +
            "-copy_extensions copy -out server.crt.new 2>/dev/null; mv server.crt.new server.crt; " +
            "rm -f /tmp/server.csr",
          "re-issue the etcd server certificate",
        );
      } finally {
        ssh.close();
      }
      suite.wd.writeStackConfig(
        STACK,
        conf("lab-v2", { "molt:rollout": { replaceCertificatesExpiringWithinDays: 30 } }),
      );
      const plan = await runCli(["plan", "--stack", STACK, "--json"], env);
      assert.equal(plan.code, 0, plan.stderr);
      const p = JSON.parse(plan.stdout) as { replacements: { node: string; reason: string }[] };
      assert.deepEqual(
        p.replacements.map((r) => r.node),
        ["ctl-cp-5"],
      );
      assert.match(
        p.replacements[0].reason,
        /certificate \/etc\/kubernetes\/pki\/etcd\/server\.crt expires .* within 30 days/,
      );
      const run = await rollout("certificate");
      assert.equal(run.code, 0, run.stderr + run.stdout.slice(-3000));
      assert.deepEqual(replacedBy(run), ["ctl-cp-5"]);
      const n = await nodes();
      assert.deepEqual(
        n.map((x) => x.name),
        ["ctl-cp-4", "ctl-cp-6", "ctl-cp-7"],
      );
      assert.ok(n.every((x) => x.member && !x.member.learner && x.member.healthy));
      // The new node's certificates are fresh: nothing more to replace.
      const after = await inspect({ stack: STACK, workDir: suite.wd.dir, env });
      assert.deepEqual(after.replacements, []);
      assert.equal(after.next.kind, "done");
      const fresh = after.certificates?.["ctl-cp-7"];
      assert.ok(fresh?.ok && !fresh.expiring, JSON.stringify(fresh));
    });
  });
});
