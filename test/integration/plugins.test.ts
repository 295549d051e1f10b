// The engine's provider plugins are set-up, checked before any `up` (issue #16 item 1):
// molt never lets the engine download one during a run, so on a machine without them
// (this one has no internet access) a cloud stack's rollout stops with exit 2, naming
// the one command that installs the plugin, and changes nothing. With the real engine.
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkProviderPlugins, PluginMissingError } from "../../orchestrator/stack/plugins";
import { repoRoot } from "../../orchestrator/stack/engine";
import { runCli } from "../support/cli";
import { locksLeft } from "../support/locks";
import { makeWorkDir, type TestWorkDir } from "../support/workdir";

describe("provider plugins (integration, the real engine, offline)", function () {
  this.timeout(120_000);
  let wd: TestWorkDir;
  let pulumiHome: string;
  before(() => {
    wd = makeWorkDir();
    // An engine home of its own: what this machine's ~/.pulumi holds does not matter.
    pulumiHome = mkdtempSync(join(tmpdir(), "molt-pulumi-home-"));
  });
  after(() => {
    wd.cleanup();
    rmSync(pulumiHome, { recursive: true, force: true });
  });

  it("a cloud stack's rollout without its plugin exits 2 with the install command, and changes nothing", async () => {
    wd.writeStackConfig("aws-offline", readFileSync(join(repoRoot, "stacks", "Pulumi.aws.yaml"), "utf8"));
    const run = await runCli(["rollout", "--stack", "aws-offline", "--yes", "--json"], {
      ...wd.env,
      MOLT_PROJECT_DIR: wd.dir,
      MOLT_HOME: join(wd.dir, "home"),
      PULUMI_HOME: pulumiHome,
    });
    assert.equal(run.code, 2, run.stderr + run.stdout);
    const error = run.events.find((e) => e.type === "error") as { error: string; message: string } | undefined;
    assert.equal(error?.error, "PluginMissingError");
    assert.match(error!.message, /need the Pulumi resource plugin aws 7\.48\.0/);
    assert.match(error!.message, /\n {2}npm run pulumi -- plugin install resource aws 7\.48\.0\n/);
    assert.match(error!.message, /nothing was changed/);
    // Nothing changed: no stack in the backend, no lock left, no plugin fetched.
    assert.ok(!existsSync(join(wd.dir, "state", ".pulumi", "stacks")), "no stack was created");
    assert.deepEqual(await locksLeft(join(wd.dir, "state"), join(wd.dir, "home")), [], "no lock left behind");
    // The plugins are checked before the lease is taken: not even a released lease is written.
    assert.ok(!existsSync(join(wd.dir, "state", ".molt", "locks")), "nothing written to the backend");
    assert.deepEqual(existsSync(join(pulumiHome, "plugins")) ? readdirSync(join(pulumiHome, "plugins")) : [], []);
  });

  it("passes once the plugin is installed at that exact version, and names the other clouds' plugins", () => {
    const dir = join(pulumiHome, "plugins", "resource-aws-v7.48.0");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "pulumi-resource-aws"), "#!/bin/sh\n", { mode: 0o755 });
    assert.doesNotThrow(() => checkProviderPlugins("aws", { PULUMI_HOME: pulumiHome }));
    assert.doesNotThrow(() => checkProviderPlugins("lab", { PULUMI_HOME: pulumiHome }), "the lab needs none");
    assert.throws(
      () => checkProviderPlugins("azure", { PULUMI_HOME: pulumiHome }),
      (e: unknown) =>
        e instanceof PluginMissingError && /plugin install resource azure-native 3\.28\.0/.test(e.message),
    );
    assert.throws(
      () => checkProviderPlugins("vsphere", { PULUMI_HOME: pulumiHome }),
      /plugin install resource vsphere 4\.18\.2/,
    );
  });
});
