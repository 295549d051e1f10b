// Operator controls on their own: their configuration (good and bad input), the maintenance
// window's clock arithmetic, the hook runner, certificate expiry parsing, the Prometheus
// metrics file (read back with a Prometheus text parser), the webhook, and live progress.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { InvalidConfigError, loadStackConfig } from "../../orchestrator/config";
import { checkWindowAtStart, controlsClock, windowState } from "../../orchestrator/controls/window";
import { type MaintenanceWindow } from "../../orchestrator/core/model";
import { HOOK_OUTPUT_LIMITS, hookEnv, runHookCallback, runHookCommand } from "../../orchestrator/controls/hooks";
import { parseCertificateExpiry } from "../../orchestrator/edges/certs";
import type { RolloutEvent } from "../../orchestrator/events";
import { metricsText, writeMetricsFile } from "../../orchestrator/report/metrics";
import { notifyUrlProblem, redact, WebhookNotifier } from "../../orchestrator/report/notify";
import { LiveProgress } from "../../orchestrator/cli/progress";
import { hook } from "../../orchestrator/act/hooks";
import { runCli } from "../support/cli";

type Summary = Extract<RolloutEvent, { type: "summary" }>;

describe("operator controls", () => {
  describe("configuration (molt:rollout, molt:hooks)", () => {
    let dir: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), "molt-controls-"));
      mkdirSync(join(dir, "stacks"));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));
    const load = (extra: string) => {
      writeFileSync(
        join(dir, "stacks", "Pulumi.c.yaml"),
        `config:\n  molt:provider: lab\n  molt:replicas: 3\n  molt:image: lab-v1\n${extra}`,
      );
      return loadStackConfig(dir, "c");
    };
    const problems = (extra: string): string[] => {
      try {
        load(extra);
      } catch (e) {
        assert.ok(e instanceof InvalidConfigError, String(e));
        assert.match(e.message, /nothing was changed/);
        return e.problems;
      }
      assert.fail("expected InvalidConfigError");
    };

    it("takes every control", () => {
      const c = load(
        [
          "  molt:rollout:",
          "    soakSeconds: 120",
          "    replaceCertificatesExpiringWithinDays: 30",
          "    window: { days: [Mon, tue], start: '22:00', end: '04:00', timeZone: Europe/Berlin }",
          "  molt:hooks:",
          "    postJoin: { command: ./check-node.sh, timeoutSeconds: 60 }",
          "    preRetire: { command: ./drain-traffic.sh }",
          "",
        ].join("\n"),
      );
      assert.equal(c.intent.timeouts.soakSeconds, 120);
      assert.equal(c.intent.rollout.replaceCertificatesExpiringWithinDays, 30);
      assert.deepEqual(c.intent.rollout.window, {
        days: ["mon", "tue"],
        start: "22:00",
        end: "04:00",
        timeZone: "Europe/Berlin",
      });
      assert.deepEqual(c.intent.hooks, {
        postJoin: { command: "./check-node.sh", timeoutSeconds: 60 },
        preRetire: { command: "./drain-traffic.sh", timeoutSeconds: 300 },
      });
    });

    it("takes molt:notify.includeHookOutput (off unless set)", () => {
      assert.deepEqual(load("  molt:notify: { includeHookOutput: true }\n").notify, { includeHookOutput: true });
      assert.deepEqual(load("").notify, { includeHookOutput: false });
    });

    it("leaves them all unset by default", () => {
      const c = load("");
      assert.equal(c.intent.timeouts.soakSeconds, undefined);
      assert.equal(c.intent.rollout.window, undefined);
      assert.equal(c.intent.hooks, undefined);
    });

    const table: [string, string, string, RegExp][] = [
      ["a negative soak", "  molt:rollout: { soakSeconds: -1 }", "molt:rollout.soakSeconds", /0 \(no soak\) or more/],
      ["a soak as words", "  molt:rollout: { soakSeconds: 1m }", "molt:rollout.soakSeconds", /seconds/],
      [
        "0 certificate days",
        "  molt:rollout: { replaceCertificatesExpiringWithinDays: 0 }",
        "molt:rollout.replaceCertificatesExpiringWithinDays",
        /at least 1/,
      ],
      [
        "a window without a time zone",
        "  molt:rollout: { window: { start: '22:00', end: '04:00' } }",
        "molt:rollout.window.timeZone",
        /IANA time zone/,
      ],
      [
        "a window in an unknown time zone",
        "  molt:rollout: { window: { start: '22:00', end: '04:00', timeZone: Mars/Olympus } }",
        "molt:rollout.window.timeZone",
        /IANA time zone such as "Europe\/Berlin"/,
      ],
      [
        "a window with a 12-hour time",
        "  molt:rollout: { window: { start: '10pm', end: '04:00', timeZone: UTC } }",
        "molt:rollout.window.start",
        /"HH:MM" \(24-hour\)/,
      ],
      [
        "a window with 25:00",
        "  molt:rollout: { window: { start: '22:00', end: '25:00', timeZone: UTC } }",
        "molt:rollout.window.end",
        /HH:MM/,
      ],
      [
        "a window with an unknown day",
        "  molt:rollout: { window: { days: [monday], start: '22:00', end: '04:00', timeZone: UTC } }",
        "molt:rollout.window.days.0",
        /one of mon, tue/,
      ],
      [
        "an empty window",
        "  molt:rollout: { window: { start: '22:00', end: '22:00', timeZone: UTC } }",
        "molt:rollout.window.end",
        /empty window/,
      ],
      [
        "a window with an unknown key",
        "  molt:rollout: { window: { start: '22:00', end: '04:00', timeZone: UTC, tz: UTC } }",
        "molt:rollout.window",
        /tz/,
      ],
      ["an unknown hook", "  molt:hooks: { preJoin: { command: x } }", "molt:hooks", /preJoin/],
      [
        "a hook without a command",
        "  molt:hooks: { postJoin: { timeoutSeconds: 5 } }",
        "molt:hooks.postJoin.command",
        /shell command/,
      ],
      [
        "a blank hook command",
        "  molt:hooks: { postJoin: { command: '  ' } }",
        "molt:hooks.postJoin.command",
        /shell command/,
      ],
      ["a hook as a plain string", "  molt:hooks: { postJoin: ./x.sh }", "molt:hooks.postJoin", /command/],
      [
        "includeHookOutput as a word",
        "  molt:notify: { includeHookOutput: 'yes' }",
        "molt:notify.includeHookOutput",
        /true or false: whether a failed hook's output/,
      ],
      ["a webhook URL in molt:notify", "  molt:notify: { url: 'https://hooks.example.com/x' }", "molt:notify", /url/],
      [
        "molt:notify as a URL",
        "  molt:notify: https://hooks.example.com/x",
        "molt:notify",
        /the URL itself is given with --notify/,
      ],
      [
        "a hook timeout of 0",
        "  molt:hooks: { postJoin: { command: x, timeoutSeconds: 0 } }",
        "molt:hooks.postJoin.timeoutSeconds",
        /at least 1/,
      ],
    ];
    for (const [title, yaml, key, why] of table)
      it(`rejects ${title}`, () => {
        const p = problems(yaml + "\n");
        const hit = p.find((x) => x.startsWith(`${key}:`));
        assert.ok(hit, `no problem names ${key}: ${JSON.stringify(p)}`);
        assert.match(hit, why);
      });
  });

  describe("maintenance window (controls/window.ts)", () => {
    const w = (o: Partial<MaintenanceWindow>): MaintenanceWindow => ({
      days: [],
      start: "22:00",
      end: "04:00",
      timeZone: "Europe/Berlin",
      ...o,
    });
    const at = (iso: string) => Date.parse(iso);

    it("is open past midnight in a window that opened the day before, and closed after it", () => {
      // 2026-12-01 is a Tuesday; Berlin is UTC+1 in winter.
      const mon = w({ days: ["mon"] });
      const open = windowState(mon, at("2026-12-01T02:30:00Z")); // Tue 03:30 Berlin: Monday's window
      assert.ok(open.open && open.closesAt.toISO()!.startsWith("2026-12-01T04:00:00.000+01:00"));
      const closed = windowState(mon, at("2026-12-01T03:30:00Z")); // Tue 04:30
      assert.ok(!closed.open && closed.opensAt.toISO()!.startsWith("2026-12-07T22:00:00.000+01:00"), "next Monday");
    });

    it("judges local wall-clock time across a DST change", () => {
      // 2026-03-29: Berlin moves from UTC+1 to UTC+2 at 02:00 local.
      const day = w({ start: "01:00", end: "05:00" });
      assert.ok(windowState(day, at("2026-03-29T02:30:00Z")).open, "04:30 CEST is inside");
      assert.ok(!windowState(day, at("2026-03-29T03:30:00Z")).open, "05:30 CEST is outside");
    });

    it("a whole-day window with 24:00, on the days listed only", () => {
      const weekend = w({ days: ["sat", "sun"], start: "00:00", end: "24:00", timeZone: "UTC" });
      assert.ok(windowState(weekend, at("2026-12-05T23:59:00Z")).open);
      assert.ok(!windowState(weekend, at("2026-12-07T00:00:00Z")).open);
    });

    it("refuses a start outside the window, saying when it opens", () => {
      assert.throws(
        () => checkWindowAtStart(w({ days: ["sat"] }), at("2026-12-01T12:00:00Z")),
        (e: Error) => e.name === "OutsideWindowError" && /opens 2026-12-05 22:00 GMT\+1/.test(e.message),
      );
      checkWindowAtStart(undefined, Date.now());
    });

    it("MOLT_TEST_CLOCK_START (test-only) starts the window's clock at a given time", () => {
      const clock = controlsClock({ MOLT_TEST_CLOCK_START: "2026-12-01T03:59:55Z" });
      assert.ok(Math.abs(clock() - at("2026-12-01T03:59:55Z")) < 1000);
      assert.throws(() => controlsClock({ MOLT_TEST_CLOCK_START: "soon" }), /not an ISO time/);
    });
  });

  describe("hook commands (controls/hooks.ts)", () => {
    it("passes the node in MOLT_* variables and withholds molt's passphrase and the caller's KUBECONFIG", () => {
      const env = hookEnv(
        { hook: "postJoin", stack: "prod", node: "prod-cp-4", nodes: ["prod-cp-2", "prod-cp-4"], address: "10.0.0.4" },
        { PATH: "/bin", PULUMI_CONFIG_PASSPHRASE: "s3cret", KUBECONFIG: "/root/.kube/config", MOLT_HOME: "/x" },
      );
      assert.equal(env.MOLT_NODE, "prod-cp-4");
      assert.equal(env.MOLT_NODE_ADDRESS, "10.0.0.4");
      assert.equal(env.MOLT_NODES, "prod-cp-2 prod-cp-4");
      assert.equal(env.PULUMI_CONFIG_PASSPHRASE, undefined);
      assert.equal(env.KUBECONFIG, undefined);
      assert.equal(env.MOLT_HOME, undefined);
      assert.equal(env.PATH, "/bin");
    });

    it("streams output lines and reports a non-zero exit", async () => {
      const lines: string[] = [];
      const r = await runHookCommand({
        command: "echo one; echo two >&2; exit 4",
        timeoutSeconds: 10,
        env: process.env,
        onLine: (l) => lines.push(l),
      });
      assert.equal(r.ok, false);
      assert.equal(r.error, "exited 4");
      assert.deepEqual(lines.sort(), ["one", "two"]);
    });

    it("keeps a flood of output to its limits, and says what it left out", async () => {
      const lines: string[] = [];
      const r = await runHookCommand({
        // 3000 numbered lines, then one line of 100 000 characters, then a last line without its newline.
        command:
          'i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done; ' +
          "head -c 100000 /dev/zero | tr '\\0' x; echo; printf 'the end'; exit 1",
        timeoutSeconds: 20,
        env: process.env,
        onLine: (l) => lines.push(l),
      });
      assert.equal(r.error, "exited 1");
      const { liveLines, keptChars, lineChars } = HOOK_OUTPUT_LIMITS;
      assert.equal(lines.length, liveLines + 1);
      assert.equal(lines[liveLines - 1], `line ${liveLines - 1}`);
      assert.match(lines[liveLines], /more than 1000 lines: the rest is not shown as it comes; .* last 8 KiB/);
      assert.ok(r.output.length <= keptChars + 100, `${r.output.length} characters kept`);
      assert.match(r.output, /^\[\d+ earlier line\(s\) not kept\]\n/);
      assert.match(r.output, /\nthe end$/);
      const long = r.output.split("\n").find((l) => l.startsWith("xxx"))!;
      assert.equal(long, `${"x".repeat(lineChars)} … [line cut at ${lineChars} characters]`);
    });

    it("reports a callback's rejection as its output, and its failure as molt's words", async () => {
      const r = await runHookCallback(
        async () => {
          throw new Error("backend says no; password=hunter2");
        },
        { hook: "preRetire", stack: "s", node: "n", nodes: [] },
        5,
      );
      assert.deepEqual(r, { ok: false, error: "threw an error", output: "backend says no; password=[redacted]" });
      const late = await runHookCallback(
        (c) => new Promise<void>((resolve) => c.signal.addEventListener("abort", () => resolve())),
        { hook: "preRetire", stack: "s", node: "n", nodes: [] },
        1,
      );
      assert.deepEqual(late, { ok: false, error: "timed out after 1s", output: "" });
    });

    it("kills the hook's whole process group at its deadline", async () => {
      const marker = join(tmpdir(), `molt-hook-${process.pid}`);
      const t = Date.now();
      const r = await runHookCommand({
        command: `(sleep 30; touch ${marker}) & wait`,
        timeoutSeconds: 1,
        env: process.env,
        onLine: () => undefined,
      });
      assert.equal(r.error, "timed out after 1s");
      assert.ok(Date.now() - t < 8000, "ended near its deadline");
      assert.ok(!existsSync(marker), "the background child went with it");
    });

    it("a hook whose shell exits but leaves a process holding its output ends at its deadline, with it", async () => {
      // Before: the deadline did nothing once the shell had exited, and the hook waited for its
      // output to close, for as long as the background process ran.
      // A sleep no other process runs, to find it by its command line.
      const sleep = `sleep 31.${process.pid}`;
      const lines: string[] = [];
      const t = Date.now();
      const r = await runHookCommand({
        command: `${sleep} & echo started`,
        timeoutSeconds: 1,
        env: process.env,
        onLine: (l) => lines.push(l),
      });
      assert.equal(r.ok, false);
      assert.equal(r.error, "timed out after 1s: its shell exited 0, but a process it started kept its output open");
      assert.deepEqual(lines, ["started"]);
      assert.ok(Date.now() - t < 8000, `ended near its deadline (${Date.now() - t} ms)`);
      const left = spawnSync("pgrep", ["-f", `^${sleep}$`], { encoding: "utf8" }).stdout.trim();
      assert.equal(left, "", "the background process went with the group");
    });

    it("a process that left the hook's group (setsid) has the hook's output cut after the SIGKILL", async function () {
      this.timeout(30_000);
      const marker = join(tmpdir(), `molt-hook-setsid-${process.pid}`);
      const t = Date.now();
      try {
        const r = await runHookCommand({
          command: `setsid sh -c 'sleep 20; touch ${marker}' & echo started`,
          timeoutSeconds: 1,
          env: process.env,
          onLine: () => undefined,
        });
        assert.equal(r.ok, false);
        assert.match(r.error ?? "", /^timed out after 1s: its shell exited 0/);
        const ms = Date.now() - t;
        assert.ok(ms >= 7000 && ms < 12_000, `ended 2 s after the SIGKILL (${ms} ms)`);
      } finally {
        spawnSync("pkill", ["-f", `touch ${marker}`]);
      }
    });
  });

  describe("certificate expiry (edges/certs.ts)", () => {
    it("reads openssl's notAfter per certificate", () => {
      const certs = parseCertificateExpiry(
        "/etc/kubernetes/pki/etcd/server.crt\tnotAfter=Dec  3 10:00:00 2026 GMT\n" +
          "/etc/kubernetes/pki/apiserver.crt\tnotAfter=Nov 30 10:00:00 2027 GMT\n",
      );
      assert.deepEqual(
        certs.map((c) => [c.path, c.notAfter.toISOString()]),
        [
          ["/etc/kubernetes/pki/etcd/server.crt", "2026-12-03T10:00:00.000Z"],
          ["/etc/kubernetes/pki/apiserver.crt", "2027-11-30T10:00:00.000Z"],
        ],
      );
    });
    it("a certificate openssl cannot read is an error, not a silent skip", () => {
      assert.throws(
        () => parseCertificateExpiry("/etc/kubernetes/pki/etcd/peer.crt\tCould not read certificate\n"),
        /peer.crt: cannot read its expiry/,
      );
    });
  });

  const summary = (o: Partial<Summary> = {}): Summary => ({
    type: "summary",
    result: "succeeded",
    reason: "3 nodes on lab-v2",
    stack: "prod",
    wallMs: 42_500,
    operations: 10,
    phases: {
      observe: 1000,
      provision: 30000,
      etcd: 300,
      kube: 0,
      endpoint: 0,
      wait: 5000,
      snapshot: 200,
      hook: 1500,
      molt: 4500,
    },
    nodes: [],
    replaced: ["prod-cp-1", "prod-cp-2", "prod-cp-3"],
    ...o,
  });

  describe("metrics file (report/metrics.ts)", () => {
    type Family = { name: string; type: string; metrics: { value: string; labels?: Record<string, string> }[] };
    const families = (text: string): Map<string, Family> =>
      new Map((parsePrometheusTextFormat(text) as Family[]).map((f) => [f.name, f]));

    it("writes result, phase durations, nodes replaced, last success time in Prometheus text", async () => {
      const f = families(await metricsText(summary(), Date.parse("2026-12-01T04:00:00Z")));
      const result = f.get("molt_rollout_result")!;
      assert.equal(result.type, "GAUGE");
      assert.deepEqual(
        result.metrics.filter((m) => m.value === "1").map((m) => m.labels),
        [{ stack: "prod", result: "succeeded" }],
      );
      assert.equal(result.metrics.length, 7, "one series per result, the others 0");
      const provision = f
        .get("molt_rollout_phase_duration_seconds")!
        .metrics.find((m) => m.labels?.phase === "provision");
      assert.equal(provision?.value, "30");
      assert.equal(f.get("molt_rollout_nodes_replaced")!.metrics[0].value, "3");
      assert.equal(f.get("molt_rollout_duration_seconds")!.metrics[0].value, "42.5");
      assert.equal(f.get("molt_rollout_last_success_timestamp_seconds")!.metrics[0].value, "1796097600");
    });

    it("keeps the last success time of an earlier run when this one did not succeed", async () => {
      const dir = mkdtempSync(join(tmpdir(), "molt-metrics-"));
      const path = join(dir, "molt.prom");
      try {
        await writeMetricsFile(path, summary(), Date.parse("2026-12-01T04:00:00Z"));
        await writeMetricsFile(
          path,
          summary({ result: "paused", replaced: ["prod-cp-4"] }),
          Date.parse("2026-12-02T04:00:00Z"),
        );
        const f = families(readFileSync(path, "utf8"));
        assert.equal(f.get("molt_rollout_last_success_timestamp_seconds")!.metrics[0].value, "1796097600");
        assert.equal(f.get("molt_rollout_last_run_timestamp_seconds")!.metrics[0].value, "1796184000");
        assert.equal(f.get("molt_rollout_result")!.metrics.find((m) => m.value === "1")?.labels?.result, "paused");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("a run that never succeeded has no last success time", async () => {
      const f = families(await metricsText(summary({ result: "failed" }), Date.now()));
      assert.equal(f.get("molt_rollout_last_success_timestamp_seconds"), undefined);
    });
  });

  describe("webhook (report/notify.ts)", () => {
    let server: Server;
    let url: string;
    const received: {
      body: { event: RolloutEvent; stack?: string };
      status: number;
      path?: string;
      authorization?: string;
    }[] = [];
    let answer: (n: number) => number = () => 200;
    let n = 0;
    before(async () => {
      server = createServer((req: IncomingMessage, res) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          const status = answer(n++);
          received.push({ body: JSON.parse(body), status, path: req.url, authorization: req.headers.authorization });
          res.writeHead(status).end();
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/molt?token=abc`;
    });
    after(() => server.close());
    beforeEach(() => {
      received.length = 0;
      n = 0;
      answer = () => 200;
    });
    const start: RolloutEvent = {
      type: "start",
      stack: "prod",
      command: "rollout",
      provider: "lab",
      replicas: 3,
      image: "lab-v2",
      time: "2026-12-01T03:00:00Z",
    };

    it("posts the start, failures and pauses, and the summary, in order; nothing else", async () => {
      const w = new WebhookNotifier(url);
      w.handle(start);
      w.handle({ type: "observed", pass: 1, nodes: [], ms: 3 });
      w.handle({ type: "decision", pass: 2, operation: { kind: "pause", reason: "window closed" } });
      w.handle({
        type: "hook",
        hook: "postJoin",
        node: "prod-cp-4",
        source: "command",
        ok: false,
        ms: 5,
        output: "",
        error: "exited 1",
      });
      w.handle(summary({ result: "paused" }));
      await w.flush();
      assert.deepEqual(
        received.map((r) => r.body.event.type),
        ["start", "decision", "hook", "summary"],
      );
      assert.ok(received.every((r) => r.body.stack === "prod"));
    });

    it("retries a failing webhook, then gives up without throwing and says so", async () => {
      answer = (i) => (i < 2 ? 503 : 200);
      const problems: string[] = [];
      const wh = new WebhookNotifier(url, { backoffMs: 10, onProblem: (m) => problems.push(m) });
      wh.handle(start);
      await wh.flush();
      assert.deepEqual(
        received.map((r) => r.status),
        [503, 503, 200],
      );
      assert.equal(problems.length, 0);
      answer = () => 500;
      received.length = 0;
      wh.handle(summary());
      await wh.flush();
      assert.equal(received.length, 3, "three attempts");
      assert.equal(problems.length, 1);
      assert.match(problems[0], /summary event was not delivered \(HTTP 500\); the rollout goes on/);
      assert.ok(!problems[0].includes("token=abc"), "the URL's query (a token) is not printed");
    });

    it("gives up on a webhook that does not answer within the timeout", async () => {
      const silent = createServer(() => undefined);
      await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
      const problems: string[] = [];
      const wh = new WebhookNotifier(`http://127.0.0.1:${(silent.address() as AddressInfo).port}/`, {
        timeoutMs: 200,
        attempts: 2,
        backoffMs: 10,
        onProblem: (m) => problems.push(m),
      });
      wh.handle(start);
      await wh.flush();
      silent.closeAllConnections();
      silent.close();
      assert.match(problems[0] ?? "", /no answer within 200 ms/);
    });

    it("sends a URL's user info as Basic authorization, fetches the URL without it, and never prints it", async () => {
      const withUser = url.replace("http://", "http://molt%40ci:s3cr%3At@");
      const problems: string[] = [];
      const wh = new WebhookNotifier(withUser, { attempts: 1, onProblem: (m) => problems.push(m) });
      wh.handle(start);
      await wh.flush();
      assert.equal(received[0].authorization, `Basic ${Buffer.from("molt@ci:s3cr:t").toString("base64")}`);
      assert.equal(received[0].path, "/hooks/molt?token=abc");
      answer = () => 500;
      wh.handle(summary());
      await wh.flush();
      assert.equal(problems.length, 1);
      assert.match(problems[0], /^webhook http:\/\/127\.0\.0\.1:\d+\/hooks\/molt: the summary event was not delivered/);
      for (const secret of ["s3cr", "token=abc", "molt%40ci", "molt@ci"]) assert.ok(!problems[0].includes(secret));
    });

    it("a failed hook reaches the webhook without its output unless includeHookOutput", async () => {
      const failed: RolloutEvent = {
        type: "hook",
        hook: "postJoin",
        node: "prod-cp-4",
        source: "command",
        ok: false,
        ms: 5,
        output: "deploy key ghp_0123456789abcdefghijABCDEFGHIJ012345\nnot healthy",
        error: "exited 1",
      };
      const quiet = new WebhookNotifier(url);
      quiet.handle(failed);
      await quiet.flush();
      const loud = new WebhookNotifier(url, { includeHookOutput: true });
      loud.handle(failed);
      await loud.flush();
      assert.deepEqual(
        received.map((r) => (r.body.event as { output?: string }).output),
        [undefined, "deploy key [redacted]\nnot healthy"],
      );
    });

    it("only http(s) URLs are accepted, and printed without credentials", () => {
      assert.equal(notifyUrlProblem("https://hooks.example.com/x"), undefined);
      assert.match(notifyUrlProblem("hooks.example.com/x") ?? "", /not a URL/);
      assert.match(notifyUrlProblem("ftp://hooks.example.com/x") ?? "", /ftp: is not supported/);
      assert.equal(redact("https://user:pw@hooks.example.com/x?token=1"), "https://hooks.example.com/x");
      const bad = notifyUrlProblem("https://user:pw@hooks example.com/x?token=1") ?? "";
      assert.match(bad, /"https:\/\/hooks example\.com\/x" is not a URL/);
      assert.match(notifyUrlProblem("user:pw@hooks.example.com/x") ?? "", /user: is not supported/);
      assert.throws(() => new WebhookNotifier("hooks.example.com/x"), /not a URL/);
    });
  });

  describe("--notify through the CLI (a run refused right after its start: no lab, no engine)", () => {
    let dir: string;
    let env: Record<string, string>;
    let server: Server;
    let port = 0;
    let status = 200;
    const heard: { path?: string; authorization?: string; type: string }[] = [];
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "molt-notify-cli-"));
      mkdirSync(join(dir, "stacks"));
      mkdirSync(join(dir, "lab", "images", "lab-v1"), { recursive: true });
      writeFileSync(join(dir, "lab", "images", "lab-v1", "image.json"), JSON.stringify({ name: "lab-v1" }));
      writeFileSync(
        join(dir, "stacks", "Pulumi.n.yaml"),
        "config:\n  molt:provider: lab\n  molt:replicas: 1\n  molt:image: lab-v1\n" +
          `  molt:lab: { name: notify, root: ${join(dir, "lab")} }\n`,
      );
      env = {
        MOLT_PROJECT_DIR: dir,
        MOLT_HOME: join(dir, "home"),
        PULUMI_BACKEND_URL: `file://${join(dir, "backend")}`,
        PULUMI_CONFIG_PASSPHRASE: "molt-test-passphrase",
        // Should the run ever get past its preflight, it stops here, before any machine.
        MOLT_PULUMI: join(dir, "no-engine"),
      };
      server = createServer((req, res) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          heard.push({
            path: req.url,
            authorization: req.headers.authorization,
            type: (JSON.parse(body) as { event: RolloutEvent }).event.type,
          });
          res.writeHead(status).end();
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      port = (server.address() as AddressInfo).port;
    });
    after(() => {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    });
    beforeEach(() => {
      heard.length = 0;
      status = 200;
    });
    // --verify on a stack without molt:release is refused after the start event (exit 2).
    const molt = (notify: string, ...extra: string[]) =>
      runCli(["rollout", "--stack", "n", "--yes", "--verify", "--notify", notify, ...extra], env);

    it("--notify http://user:secret@host/x?token=abc: delivered with the Authorization header; printed nowhere", async () => {
      const run = await molt(`http://user:secret@127.0.0.1:${port}/x?token=abc`, "--json");
      assert.equal(run.code, 2, run.stderr + run.stdout);
      assert.deepEqual(heard, [
        {
          path: "/x?token=abc",
          authorization: `Basic ${Buffer.from("user:secret").toString("base64")}`,
          type: "start",
        },
      ]);
      status = 400;
      for (const args of [["--json"], []]) {
        const failing = await molt(`http://user:secret@127.0.0.1:${port}/x?token=abc`, ...args);
        const printed = failing.stdout + failing.stderr;
        assert.match(printed, /webhook http:\/\/127\.0\.0\.1:\d+\/x: the start event was not delivered \(HTTP 400\)/);
        assert.ok(!printed.includes("secret") && !printed.includes("abc"), printed);
      }
    });

    it("--json: a webhook failure is a warning event before the last line; without --json, on stderr", async () => {
      status = 400;
      const json = await molt(`http://127.0.0.1:${port}/x`, "--json");
      assert.equal(json.code, 2, json.stderr + json.stdout);
      assert.equal(json.stderr, "");
      assert.deepEqual(
        json.events.map((e) => e.type),
        ["start", "warning", "error"],
      );
      assert.match(String(json.events[1].message), /the start event was not delivered \(HTTP 400\)/);
      const human = await molt(`http://127.0.0.1:${port}/x`);
      assert.equal(human.code, 2);
      assert.match(
        human.stderr,
        /\d\d:\d\d:\d\d {2}! webhook http:\/\/127\.0\.0\.1:\d+\/x: the start event was not delivered/,
      );
      assert.ok(!human.stdout.includes("webhook"), human.stdout);
    });
  });

  describe("live progress (cli/progress.ts)", () => {
    it("redraws one line with the operation, its elapsed time and the engine's current step", async () => {
      const out = new PassThrough() as unknown as NodeJS.WriteStream & PassThrough;
      let text = "";
      out.on("data", (c: Buffer) => (text += c.toString()));
      Object.assign(out, { isTTY: true, columns: 200, rows: 40 });
      let t = 0;
      const live = await LiveProgress.open(out, () => t);
      live.onEvent({
        type: "decision",
        pass: 3,
        operation: {
          kind: "surge",
          entry: { name: "lab-cp-4", image: "lab-v2", role: "control-plane", generation: 4, init: false },
          reason: "x",
        },
      });
      t = 12_000;
      live.onEvent({
        type: "resource",
        op: "create",
        resource: "lab-cp-4-machine",
        kind: "molt:lab:Machine",
        status: "started",
      });
      live.write("03:00:01  a line above\n");
      live.stop();
      assert.match(text, /surge lab-cp-4 · 12s · create lab-cp-4-machine started/);
      assert.match(text, /a line above/);
    });
  });
});

describe("the hook act on a Kubernetes stack (act/hooks.ts)", () => {
  it("hands the hook the cluster's admin kubeconfig (0600) and an ssh_config, only while it runs", async () => {
    const ran: string[] = [];
    const seen: { kubeconfig?: string; sshConfig?: string; mode?: number; text?: string; ssh?: string } = {};
    const ctx = {
      edges: {
        stack: {
          name: "prod",
          state: async () => ({
            nodes: [{ name: "prod-cp-4", image: "i", role: "control-plane", generation: 4, init: false }],
            endpoints: [
              {
                name: "prod-cp-4",
                privateAddress: "10.0.0.4",
                sshHost: "10.0.0.4",
                sshPort: 22,
                hostPublicKey: "ssh-ed25519 AAAAkey",
                providerId: "x",
              },
            ],
            sshUser: "ubuntu",
            sshPrivateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n-----END OPENSSH PRIVATE KEY-----",
            orphans: [],
          }),
        },
        nodes: {
          run: async (node: string, command: string) => {
            ran.push(`${node}: ${command}`);
            return "apiVersion: v1\nkind: Config\nclusters: [{name: k, cluster: {server: https://lb:6443}}]\n";
          },
        },
      },
      world: { kube: { via: "prod-cp-3" } },
      intent: { kubernetesVersion: "1.37.2", hooks: { postJoin: { timeoutSeconds: 5 } } },
      pollMs: 1,
      timed: async <T>(_p: unknown, _o: unknown, _n: unknown, fn: () => Promise<T>) => fn(),
      report: () => undefined,
      hookCallbacks: {
        postJoin: async (c: { kubeconfig?: string; sshConfig?: string }) => {
          seen.kubeconfig = c.kubeconfig;
          seen.sshConfig = c.sshConfig;
          seen.mode = statSync(c.kubeconfig!).mode & 0o777;
          seen.text = readFileSync(c.kubeconfig!, "utf8");
          seen.ssh = readFileSync(c.sshConfig!, "utf8");
        },
      },
    };
    const outcome = await hook(
      { kind: "hook", hook: "postJoin", node: "prod-cp-4", reason: "test" },
      ctx as unknown as Parameters<typeof hook>[1],
    );
    assert.deepEqual(outcome, { kind: "done" });
    assert.deepEqual(ran, ["prod-cp-3: SUDO cat /etc/kubernetes/admin.conf"]);
    assert.equal(seen.mode, 0o600);
    assert.match(seen.text ?? "", /server: https:\/\/lb:6443/);
    assert.match(seen.ssh ?? "", /Host prod-cp-4\n {2}HostName 10\.0\.0\.4\n {2}Port 22\n {2}User ubuntu/);
    assert.match(seen.ssh ?? "", /StrictHostKeyChecking yes/);
    assert.ok(!existsSync(seen.kubeconfig!) && !existsSync(seen.sshConfig!), "removed after the hook");
  });
});
