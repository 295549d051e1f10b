// The staging-across-environments scenario on the lab (test/e2e/staging.test.ts runs it in
// `npm test`; test/long/staging.test.ts with `full`, which adds a second release rolled on
// both stacks). Through the CLI a CI pipeline runs: two stacks
// (staging on lab t20, prod on lab t21, each on its own bridge) in one project, each with
// its own file backend. Staging rolls to a release and soaks it; the record lands in
// staging's backend; promote writes the release into prod's config; prod's rollout checks
// staging's record in staging's backend first. Staging's CI holds the signing key
// (MOLT_SIGNING_KEY_FILE); prod's config names its public key. A release never verified, a
// tampered record, a record signed with another key and a staging that breaks during its soak
// are refused.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createPrivateKey } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { netnsName } from "../../infra/lab/host";
import { FileStore } from "../../orchestrator/backend/file";
import {
  readRecord,
  recordBytes,
  recordDigestOf,
  recordKey,
  type VerificationRecord,
} from "../../orchestrator/promotion/record";
import { generateSigningKeyPair, signerOf } from "../../orchestrator/promotion/signing";
import { openStack } from "../../orchestrator/stack/driver";
import { readStoredState } from "../../orchestrator/stack/state";
import { runCli, startCli, summaryOf, type CliRun } from "./cli";
import { labLeftovers, testLab } from "./lab";
import { makeWorkDir, type TestWorkDir } from "./workdir";

const labs = { staging: testLab(20), prod: testLab(21) };
type StackName = keyof typeof labs;
const SOAK_MINUTES = 0.1; // 6 s: fractional minutes are allowed (docs/configuration.md, molt:promotion.soakMinutes)

export function stagingScenario(full: boolean): void {
  describe(`staging across environments on the lab (${full ? "full, " : ""}labs t20 + t21)`, function () {
    /** The release staging and prod are on once the roll steps are done, and its image. */
    const last = full ? { name: "r2", image: "lab-v2" } : { name: "r1", image: "lab-v1" };
    let wd: TestWorkDir;
    const env: Record<StackName, Record<string, string>> = { staging: {}, prod: {} };
    const figures: Record<string, number> = {};
    const outputs: string[] = [];
    let stagingStore: FileStore;
    const started = Date.now();
    /** Staging's signing key, as `molt keygen` makes it: the private key in staging's CI only. */
    const stagingKey = generateSigningKeyPair();

    const release = (name: string, image: string) => ({
      name,
      etcdVersion: "3.4.23",
      images: { staging: image, prod: image },
    });
    const stackFile = (stack: StackName) => join(wd.dir, "stacks", `Pulumi.${stack}.yaml`);
    function writeStack(stack: StackName, image: string, extra: Record<string, unknown> = {}): void {
      const lab = labs[stack];
      wd.writeStackConfig(
        stack,
        "# " +
          stack +
          ": written by the e2e suite\n" +
          stringify({
            config: {
              "molt:provider": "lab",
              "molt:replicas": stack === "staging" ? 3 : 1,
              "molt:image": image,
              "molt:timeouts": { joinSeconds: 120, settleSeconds: 30 },
              "molt:lab": { name: lab.lab, bridge: lab.bridge, subnet: lab.subnet },
              ...extra,
            },
          }),
      );
    }
    const stagingRelease = (r: ReturnType<typeof release>, soakMinutes = SOAK_MINUTES) =>
      writeStack("staging", r.images.staging, { "molt:release": r, "molt:promotion": { soakMinutes } });
    const prodPromotion = () => ({
      "molt:promotion": {
        requireVerifiedOn: [
          { stack: "staging", backend: env.staging.PULUMI_BACKEND_URL, publicKey: stagingKey.publicKey },
        ],
      },
    });

    const cli = async (stack: StackName, args: string[]): Promise<CliRun> => {
      const run = await runCli(args, env[stack]);
      outputs.push(run.stdout, run.stderr);
      return run;
    };
    const rollout = (stack: StackName, ...extra: string[]) =>
      cli(stack, ["rollout", "--stack", stack, "--yes", "--json", ...extra]);
    const promote = (...extra: string[]) =>
      cli("prod", ["promote", "--from", "staging", "--to", "prod", "--json", ...extra]);
    const errorOf = (run: CliRun) => String(run.events.find((e) => e.type === "error")?.message ?? run.stderr);
    /** The node list in the stack's backend: [name, image] per node. */
    const nodesOf = async (stack: StackName) =>
      (
        await readStoredState(
          await openStack({
            stackName: stack,
            workDir: wd.dir,
            env: env[stack],
            create: false,
            program: async () => ({}),
          }),
        )
      ).nodes;
    const images = async (stack: StackName) => (await nodesOf(stack)).map((n) => n.image);
    const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
      const t = Date.now();
      try {
        return await fn();
      } finally {
        figures[name] = Date.now() - t;
      }
    };

    before(() => {
      wd = makeWorkDir("molt-staging-");
      mkdirSync(join(wd.dir, "home"));
      mkdirSync(join(wd.dir, "state-staging"));
      mkdirSync(join(wd.dir, "state-prod"));
      for (const s of ["staging", "prod"] as const)
        env[s] = {
          ...wd.env,
          MOLT_PROJECT_DIR: wd.dir,
          MOLT_HOME: join(wd.dir, "home"),
          PULUMI_BACKEND_URL: `file://${join(wd.dir, `state-${s}`)}`,
        };
      stagingStore = new FileStore(join(wd.dir, "state-staging"));
      const keyFile = join(wd.dir, "staging-signing.pem");
      writeFileSync(keyFile, stagingKey.privatePem, { mode: 0o600 });
      env.staging.MOLT_SIGNING_KEY_FILE = keyFile;
    });

    after(async function () {
      this.timeout(300_000);
      console.log("    staging figures (ms):", JSON.stringify(figures));
      for (const s of ["staging", "prod"] as const) {
        try {
          const st = await openStack({
            stackName: s,
            workDir: wd.dir,
            env: env[s],
            create: false,
            program: async () => ({}),
          });
          await st.destroy();
        } catch (e) {
          console.log(`    cleanup ${s}:`, (e as Error).message.split("\n")[0]);
        }
        const left = labLeftovers(labs[s]);
        if (left.netns.length || left.haproxy.length) {
          console.log(`    cleanup ${s}: leftovers after destroy, cleaning lab ${labs[s].lab}`);
          execFileSync("bash", ["tools/lab/clean.sh", labs[s].lab, labs[s].bridge], { stdio: "ignore" });
        }
      }
      if (this.currentTest?.state === "failed") for (const o of outputs.slice(-6)) console.log(o.slice(-3000));
      wd.cleanup();
      console.log(`    suite wall time ${((Date.now() - started) / 1000).toFixed(0)} s`);
    });

    it("staging: rollout --verify creates the cluster on r1 and soaks it; its record is in its backend", async () => {
      stagingRelease(release("r1", "lab-v1"));
      const run = await timed("stagingCreateAndSoak", () => rollout("staging", "--verify"));
      assert.equal(run.code, 0, errorOf(run) + run.stdout.slice(-2000));
      assert.equal(summaryOf(run).result, "succeeded");
      const soaks = run.events.filter((e) => e.type === "soak");
      assert.ok(soaks.length >= 2 && soaks.every((e) => e.healthy), JSON.stringify(soaks));
      assert.ok(run.events.some((e) => e.type === "verification" && e.state === "verified"));
      const rec = await readRecord(stagingStore, "staging", "r1");
      assert.equal(rec?.record.soak.result, "passed");
      assert.equal(rec?.record.signature?.keyId, stagingKey.keyId, "signed with staging's key");
      assert.deepEqual(
        rec?.record.converged.nodes.map((n) => n.image),
        ["lab-v1", "lab-v1", "lab-v1"],
      );
    });

    it("prod: a rollout without a release is refused; promote writes r1 into prod's config; prod rolls", async () => {
      writeStack("prod", "lab-v1", prodPromotion());
      const refused = await rollout("prod");
      assert.equal(refused.code, 2, refused.stdout);
      assert.match(errorOf(refused), /names no molt:release/);

      const p = await timed("promoteR1", () => promote("--yes"));
      assert.equal(p.code, 0, errorOf(p));
      const diff = p.events.find((e) => e.type === "promote-diff");
      assert.match(String(diff?.diff), /^\+ {2}molt:release:$/m);
      assert.match(readFileSync(stackFile("prod"), "utf8"), /^# prod: written by the e2e suite$/m, "comments kept");

      const run = await timed("prodCreate", () => rollout("prod"));
      assert.equal(run.code, 0, errorOf(run));
      const check = run.events.find((e) => e.type === "release-check") as
        { sources: { stack: string; verified: boolean; detail: string }[] } | undefined;
      assert.deepEqual(
        check?.sources.map((s) => [s.stack, s.verified]),
        [["staging", true]],
      );
      assert.match(check!.sources[0].detail, /signed with the trusted key SHA256:/);
      assert.deepEqual(await images("prod"), ["lab-v1"]);
    });

    // Registered in the full scenario only (test/long): npm test runs without it, not past it.
    if (full)
      it("staging rolls to r2; promote waits for its soak; verify; promote; prod rolls to r2", async () => {
        stagingRelease(release("r2", "lab-v2"));
        const roll = await timed("stagingRoll", () => rollout("staging"));
        assert.equal(roll.code, 0, errorOf(roll));
        assert.equal(summaryOf(roll).result, "succeeded");

        const early = await promote("--yes");
        assert.equal(early.code, 2);
        assert.match(errorOf(early), /soak .* has not finished: run molt verify --stack staging/);

        const status = await cli("staging", ["status", "--stack", "staging", "--json"]);
        const st = JSON.parse(status.stdout) as { release: { name: string; verification: { state: string } } };
        assert.deepEqual([st.release.name, st.release.verification.state], ["r2", "soaking"]);

        const v = await timed("verify", () => cli("staging", ["verify", "--stack", "staging", "--json"]));
        assert.equal(v.code, 0, errorOf(v));
        assert.equal(v.events.at(-1)?.result, "verified");

        const before = readFileSync(stackFile("prod"), "utf8");
        const unattended = await promote();
        assert.equal(unattended.code, 6, "no --yes without a terminal");
        assert.equal(readFileSync(stackFile("prod"), "utf8"), before, "nothing written");

        const p = await promote("--yes");
        assert.equal(p.code, 0, errorOf(p));
        const prodConfig = (parse(readFileSync(stackFile("prod"), "utf8")) as { config: Record<string, unknown> })
          .config;
        assert.equal(prodConfig["molt:image"], "lab-v2");
        assert.deepEqual(await images("prod"), ["lab-v1"], "promote did not touch prod's cluster");

        const run = await timed("prodRoll", () => rollout("prod"));
        assert.equal(run.code, 0, errorOf(run));
        assert.equal(summaryOf(run).result, "succeeded");
        assert.deepEqual(await images("prod"), ["lab-v2"]);
      });

    it("a release never verified on staging is refused for prod, exit 2, nothing changed", async () => {
      const good = readFileSync(stackFile("prod"), "utf8");
      writeStack("prod", "lab-v1", { ...prodPromotion(), "molt:release": release("r1-hotfix", "lab-v1") });
      try {
        const run = await rollout("prod");
        assert.equal(run.code, 2);
        assert.match(errorOf(run), /staging.*release r1-hotfix has no verification record on stack staging/s);
        assert.deepEqual(await images("prod"), [last.image]);
      } finally {
        wd.writeStackConfig("prod", good);
      }
    });

    it("a record edited in staging's backend, or resealed and signed by another key, is refused", async () => {
      const key = recordKey("staging", last.name);
      const o = (await stagingStore.get(key))!;
      const other = signerOf(createPrivateKey(generateSigningKeyPair().privatePem));
      const edits: [string, (d: VerificationRecord) => void, RegExp][] = [
        ["release.images.prod", (d) => (d.release.images.prod = "lab-v0"), /altered after it was written/],
        ["converged.nodes[0].image", (d) => (d.converged.nodes[0].image = "lab-v0"), /altered after it was written/],
        [
          "resealed and signed with another key",
          (d) => {
            d.converged.operations += 1;
            delete d.signature;
            d.recordDigest = recordDigestOf(d);
            d.signature = { algorithm: "ed25519", keyId: other.keyId, value: other.sign(recordBytes(d)) };
          },
          /signed with another key/,
        ],
      ];
      try {
        for (const [what, edit, want] of edits) {
          const doc = JSON.parse(o.body.toString()) as VerificationRecord;
          edit(doc);
          const cur = (await stagingStore.get(key))!;
          assert.ok(await stagingStore.putIfMatch(key, Buffer.from(JSON.stringify(doc)), cur.etag));
          const run = await rollout("prod");
          assert.equal(run.code, 2, what);
          assert.match(errorOf(run), want, what);
        }
        assert.deepEqual(await images("prod"), [last.image], "prod was not touched");
      } finally {
        const now = (await stagingStore.get(key))!;
        await stagingStore.putIfMatch(key, o.body, now.etag);
      }
    });

    it("a staging whose member's etcd stops during the soak gets no record; its release is not promoted", async () => {
      stagingRelease(release("r3", last.image), 0.5);
      const noop = await rollout("staging");
      assert.equal(noop.code, 0, errorOf(noop));
      assert.equal(summaryOf(noop).result, "noop");
      assert.equal((await readRecord(stagingStore, "staging", "r3"))?.record.soak.result, "running");
      const status = await cli("staging", ["status", "--stack", "staging", "--json"]);
      const st = JSON.parse(status.stdout) as { release: { name: string; verification: { state: string } } };
      assert.deepEqual([st.release.name, st.release.verification.state], ["r3", "soaking"]);
      const early = await promote("--yes");
      assert.equal(early.code, 2);
      assert.match(errorOf(early), /soak .* has not finished: run molt verify --stack staging/);

      const victim = (await nodesOf("staging"))[1].name;
      let stopped = 0;
      const t = Date.now();
      const handle = startCli(["verify", "--stack", "staging", "--json"], env.staging, (e) => {
        if (e.type === "soak" && e.healthy && stopped === 0) stopped = stopEtcd(victim);
      });
      const v = await handle.done;
      figures.brokenSoak = Date.now() - t;
      outputs.push(v.stdout, v.stderr);
      assert.ok(stopped > 0, "etcd of a member was stopped during the soak");
      assert.equal(v.code, 7, v.stdout);
      const summary = v.events.at(-1) as { result: string; reason: string };
      assert.equal(summary.result, "soak-failed");
      assert.match(summary.reason, new RegExp(`not a healthy voter: ${victim}`));
      assert.equal(await readRecord(stagingStore, "staging", "r3"), undefined, "no record is left");
      const p = await promote("--yes");
      assert.equal(p.code, 2);
      assert.match(errorOf(p), /r3 has no verification record on stack staging/);
    });

    it("bad input to verify, promote and the release keys: exit 2, a clear message, nothing written", async () => {
      const prodText = readFileSync(stackFile("prod"), "utf8");
      const stagingText = readFileSync(stackFile("staging"), "utf8");
      const rows: {
        name: string;
        stack: StackName;
        args: string[];
        code: number;
        message: RegExp;
        conf?: () => void;
      }[] = [
        {
          name: "promote to itself",
          stack: "prod",
          args: ["promote", "--from", "staging", "--to", "staging", "--yes", "--json"],
          code: 2,
          message: /--from and --to are both staging/,
        },
        {
          name: "promote without --from",
          stack: "prod",
          args: ["promote", "--to", "prod", "--yes", "--json"],
          code: 2,
          message: /required option '--from <stack>'/,
        },
        {
          name: "promote to a stack the release has no image for",
          stack: "prod",
          args: ["promote", "--from", "staging", "--to", "dr", "--yes", "--json"],
          code: 2,
          message: /names no image for stack dr/,
        },
        {
          name: "promote from a backend molt cannot read records from",
          stack: "prod",
          args: ["promote", "--from", "staging", "--to", "prod", "--yes", "--json", "--from-backend", "https://x"],
          code: 2,
          message: /records from file:\/\/, s3:\/\/ and azblob:\/\/ backends only, and https:\/\/x \(--from-backend\)/,
        },
        {
          name: "promote to a name that is not a stack",
          stack: "prod",
          args: ["promote", "--from", "staging", "--to", "../prod", "--yes", "--json"],
          code: 2,
          message: /--to \.\.\/prod is not a stack name/,
        },
        {
          name: "verify with a signing key file that does not exist",
          stack: "staging",
          args: ["verify", "--stack", "staging", "--json", "--signing-key", "/nonexistent/key.pem"],
          code: 2,
          message: /the signing key file \/nonexistent\/key\.pem \(--signing-key\) does not exist/,
        },
        {
          name: "verify with the key itself on the command line",
          stack: "staging",
          args: ["verify", "--stack", "staging", "--json", "--signing-key", stagingKey.privatePem],
          code: 2,
          message: /--signing-key takes the path of a key file, not the key itself/,
        },
        {
          name: "a private key as prod's trusted publicKey",
          stack: "prod",
          args: ["rollout", "--stack", "prod", "--yes", "--json"],
          code: 2,
          message: /requireVerifiedOn\.0\.publicKey: it is a private key/,
          conf: () =>
            writeStack("prod", last.image, {
              "molt:promotion": { requireVerifiedOn: [{ stack: "staging", publicKey: stagingKey.privatePem }] },
            }),
        },
        {
          name: "promote from a backend folder that does not exist",
          stack: "prod",
          args: [
            "promote",
            "--from",
            "staging",
            "--to",
            "prod",
            "--yes",
            "--json",
            "--from-backend",
            "file:///nonexistent",
          ],
          code: 2,
          message: /cannot be read from file:\/\/\/nonexistent/,
        },
        {
          name: "verify a stack without a release",
          stack: "prod",
          args: ["verify", "--stack", "prod", "--json"],
          code: 2,
          message: /names no molt:release/,
          conf: () => writeStack("prod", last.image),
        },
        {
          name: "rollout --verify on a stack without a release",
          stack: "prod",
          args: ["rollout", "--stack", "prod", "--yes", "--json", "--verify"],
          code: 2,
          message: /--verify: stack prod names no molt:release/,
          conf: () => writeStack("prod", last.image),
        },
        {
          name: "rollout with a release whose image is not molt:image",
          stack: "staging",
          args: ["rollout", "--stack", "staging", "--yes", "--json"],
          code: 2,
          message: /molt:image: lab-v1 is not release r9's image for stack staging \(lab-v2\)/,
          conf: () => writeStack("staging", "lab-v1", { "molt:release": release("r9", "lab-v2") }),
        },
        {
          name: "rollout with a release naming an etcd the image does not carry",
          stack: "staging",
          args: ["rollout", "--stack", "staging", "--yes", "--json"],
          code: 2,
          message: /molt:release.etcdVersion: 3.6.16, but image lab-v\d carries etcd 3.4.23/,
          conf: () =>
            writeStack("staging", last.image, {
              "molt:release": { ...release("r9", last.image), etcdVersion: "3.6.16" },
            }),
        },
        {
          name: "promote with a release key misspelt in staging's config",
          stack: "prod",
          args: ["promote", "--from", "staging", "--to", "prod", "--yes", "--json"],
          code: 2,
          message: /molt:relase: not a molt setting/,
          conf: () => writeStack("staging", "lab-v2", { "molt:relase": release("r9", "lab-v2") }),
        },
      ];
      const failures: string[] = [];
      for (const r of rows) {
        r.conf?.();
        try {
          const run = await cli(r.stack, r.args);
          const msg = errorOf(run);
          if (run.code !== r.code || !r.message.test(msg))
            failures.push(`${r.name}: exit ${run.code}: ${msg.slice(0, 300)}`);
          if (/\n\s+at .+:\d+:\d+\)?\n/.test(run.stdout + run.stderr)) failures.push(`${r.name}: a stack trace`);
          const keyBody = stagingKey.privatePem.split("\n")[1];
          if ((run.stdout + run.stderr).includes(keyBody)) failures.push(`${r.name}: the private key was printed`);
        } finally {
          wd.writeStackConfig("prod", prodText);
          wd.writeStackConfig("staging", stagingText);
        }
      }
      assert.deepEqual(failures, []);
      assert.equal(readFileSync(stackFile("prod"), "utf8"), prodText, "prod's config unchanged");
    });

    /** Stops (SIGTERM) the etcd of one lab machine, as an operator or a crash would; returns how many processes. */
    function stopEtcd(node: string): number {
      const pids = execFileSync("ip", ["netns", "pids", netnsName(labs.staging.lab, node)], { encoding: "utf8" })
        .split(/\s+/)
        .filter(Boolean)
        .filter((p) => {
          try {
            return readFileSync(`/proc/${p}/comm`, "utf8").trim() === "etcd";
          } catch {
            return false;
          }
        });
      for (const p of pids) process.kill(Number(p), "SIGTERM");
      return pids.length;
    }
  });
}
