// The user's stacks/Pulumi.<stack>.yaml keeps its text when Pulumi rewrites it.
import * as assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { keepingUserText, restoredText } from "../../orchestrator/stack/stack-file";

const user = `# my lab
config:
  molt:provider: lab
  # odd
  molt:replicas: 3
  molt:rollout:
    maxSurge: 1
`;
// What `pulumi stack init` writes back (measured with the pinned engine).
const pulumis = `# my lab
config:
  molt:provider: lab
  # odd
  molt:replicas: "3"
  molt:rollout:
    maxSurge: 1
encryptionsalt: v1:aB1Jxs+h9Iw=:v1:pikuHsOi8t9SiunO:N/ZntlVsf1XSqJbG0blxCWeSP804eg==
`;

describe("the stack file keeps the user's text", () => {
  it("undoes the re-serialization and keeps the salt Pulumi added", () => {
    assert.equal(
      restoredText(user, pulumis),
      user + "encryptionsalt: v1:aB1Jxs+h9Iw=:v1:pikuHsOi8t9SiunO:N/ZntlVsf1XSqJbG0blxCWeSP804eg==\n",
    );
  });

  it("adds a newline before the added key when the user's file has none at its end", () => {
    assert.equal(restoredText(user.trimEnd(), pulumis), user + pulumis.split("\n").at(-2) + "\n");
  });

  it("leaves Pulumi's text when a config value really changed (a `pulumi config set`)", () => {
    assert.equal(restoredText(user, pulumis.replace('"3"', '"5"')), undefined);
  });

  it("leaves Pulumi's text when it changed a key the user had (a new salt)", () => {
    const withSalt = user + "encryptionsalt: v1:old\n";
    assert.equal(restoredText(withSalt, pulumis), undefined);
  });

  it("changes nothing when Pulumi did not write", () => {
    assert.equal(restoredText(user, user), undefined);
  });

  it("restores the file around an operation that rewrote it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "molt-stackfile-"));
    try {
      const path = join(dir, "Pulumi.lab.yaml");
      writeFileSync(path, user);
      await keepingUserText(path, async () => writeFileSync(path, pulumis));
      assert.equal(readFileSync(path, "utf8"), user + pulumis.split("\n").at(-2) + "\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
