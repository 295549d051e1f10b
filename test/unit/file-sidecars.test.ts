import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  engineBackendUrl,
  fileBackendDir,
  removeBrokenSidecars,
  userBackendUrl,
} from "../../orchestrator/backend/file-sidecars";

describe("file backend metadata sidecars", () => {
  const rows: [string, string][] = [
    ["file:///var/lib/molt", "file:///var/lib/molt?metadata=skip"],
    ["file:///var/lib/molt?no_tmp_dir=false", "file:///var/lib/molt?no_tmp_dir=false&metadata=skip"],
    // The user's own choice stays.
    ["file:///var/lib/molt?metadata=", "file:///var/lib/molt?metadata="],
    ["s3://bucket/prefix?region=eu-west-1", "s3://bucket/prefix?region=eu-west-1"],
    ["https://api.pulumi.com", "https://api.pulumi.com"],
  ];
  for (const [user, engine] of rows)
    it(`gives the engine ${engine} for ${user}, and back`, () => {
      assert.equal(engineBackendUrl(user), engine);
      assert.equal(userBackendUrl(engine), user);
    });

  it("finds the folder of file:// URLs only", () => {
    assert.equal(fileBackendDir("file:///var/lib/molt?metadata=skip"), "/var/lib/molt");
    assert.equal(fileBackendDir("file:///a%20b"), "/a b");
    assert.equal(fileBackendDir("s3://bucket"), undefined);
  });

  it("removes sidecars that are not whole JSON, and only those, outside history and backups", () => {
    const dir = mkdtempSync(join(tmpdir(), "molt-sidecars-"));
    try {
      const p = (...s: string[]) => join(dir, ".pulumi", ...s);
      for (const d of [
        ["stacks", "molt"],
        ["locks", "organization", "molt", "s"],
        ["history", "molt", "s"],
        ["backups"],
      ])
        mkdirSync(p(...d), { recursive: true });
      const files: Record<string, string> = {
        [p("meta.yaml.attrs")]: "", // empty: broken
        [p("stacks", "molt", "s.json.attrs")]: '{"user.content_type":"appl', // cut short: broken
        [p("stacks", "molt", "t.json.attrs")]: '{"user.content_type":"application/json"}\n', // whole
        [p("stacks", "molt", "s.json")]: "", // not a sidecar: never touched
        [p("locks", "organization", "molt", "s", "x.json.attrs")]: "", // broken
        [p("history", "molt", "s", "s-1.history.json.attrs")]: "", // history: left alone
        [p("backups", "s.json.attrs")]: "", // backups: left alone
      };
      for (const [f, text] of Object.entries(files)) writeFileSync(f, text);
      const removed = removeBrokenSidecars(dir).sort();
      assert.deepEqual(removed, [
        p("locks", "organization", "molt", "s", "x.json.attrs"),
        p("meta.yaml.attrs"),
        p("stacks", "molt", "s.json.attrs"),
      ]);
      for (const f of Object.keys(files)) assert.equal(existsSync(f), !removed.includes(f), f);
      assert.deepEqual(removeBrokenSidecars(dir), [], "a second pass finds nothing");
      assert.deepEqual(removeBrokenSidecars(join(dir, "missing")), [], "no backend folder yet: nothing to do");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
