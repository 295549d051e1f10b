import * as assert from "node:assert/strict";
import { installCommand, missingPlugins, PluginMissingError } from "../../orchestrator/stack/plugins";

const aws = { kind: "resource" as const, name: "aws", version: "7.48.0" };

describe("provider plugin check (orchestrator/stack/plugins.ts)", () => {
  it("wants exactly the version the SDK asks for", () => {
    assert.deepEqual(missingPlugins([aws], [{ kind: "resource", name: "aws", version: "7.48.0" }]), []);
    assert.deepEqual(missingPlugins([aws], [{ kind: "resource", name: "aws", version: "7.47.0" }]), [aws]);
    assert.deepEqual(missingPlugins([aws], [{ kind: "resource", name: "aws", version: "v7.48.0" }]), []);
    assert.deepEqual(missingPlugins([aws], [{ kind: "language", name: "aws", version: "7.48.0" }]), [aws]);
    assert.deepEqual(missingPlugins([aws], []), [aws]);
  });

  it("counts a plugin binary on PATH, as the engine does", () => {
    assert.deepEqual(
      missingPlugins([aws], [], (b) => b === "pulumi-resource-aws"),
      [],
    );
  });

  it("names the one command that installs it, through tools/pulumi.sh", () => {
    assert.equal(installCommand(aws), "npm run pulumi -- plugin install resource aws 7.48.0");
    const e = new PluginMissingError("aws", [aws]);
    assert.match(e.message, /^stacks of provider aws need the Pulumi resource plugin aws 7\.48\.0/);
    assert.match(e.message, /nothing was changed/);
    assert.match(e.message, /--file <archive>/);
  });
});
