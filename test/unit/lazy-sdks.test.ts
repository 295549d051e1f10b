// The cloud SDKs are loaded when a stack needs them, never when molt starts
// (orchestrator/edges/aws-sdks.ts, infra/providers/sdk.ts): the AWS clients alone are about
// 60 MiB of a process's memory, which a lab, vSphere or Azure run never uses (bench goal 5:
// the orchestrator's peak RSS). Each case runs in a fresh node process, whose module cache
// shows what was loaded.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";

const dist = resolve(__dirname, "..", "..");
const CLOUD =
  /node_modules\/(@aws-sdk|@smithy|@azure|@pulumi\/aws\/(?!package\.json)|@pulumi\/azure-native\/(?!package\.json))/;

/** Runs `body` in a fresh node with `load` required first; returns the cloud modules in its cache. */
function cloudModulesAfter(load: string[], body = ""): string[] {
  const script =
    `for (const m of ${JSON.stringify(load)}) require(m);` +
    body +
    `process.stdout.write(JSON.stringify(Object.keys(require.cache).filter((k) => ${CLOUD}.test(k))));`;
  const r = spawnSync(process.execPath, ["-e", script], { cwd: resolve(dist, ".."), encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as string[];
}

const packages = (files: string[]) =>
  [...new Set(files.map((f) => /node_modules\/(@[^/]+\/[^/]+)/.exec(f)?.[1] ?? f))].sort();

describe("cloud SDKs load when a stack needs them, not when molt starts", () => {
  it("the library's entry and the CLI's load no cloud SDK", () => {
    const loaded = cloudModulesAfter([
      resolve(dist, "orchestrator", "index.js"),
      resolve(dist, "orchestrator", "cli", "main.js"),
    ]);
    assert.deepEqual(packages(loaded), []);
  });

  it("each AWS client loads on first use (the check above can see one)", () => {
    const sdks = resolve(dist, "orchestrator", "edges", "aws-sdks.js");
    const loaded = cloudModulesAfter(
      [sdks],
      `const s = require(${JSON.stringify(sdks)}); s.s3Sdk(); s.ec2Sdk(); s.elbV2Sdk(); s.elbClassicSdk();`,
    );
    const got = packages(loaded);
    for (const p of [
      "@aws-sdk/client-s3",
      "@aws-sdk/client-ec2",
      "@aws-sdk/client-elastic-load-balancing-v2",
      "@aws-sdk/client-elastic-load-balancing",
    ])
      assert.ok(got.includes(p), `${p} not loaded: ${got.join(", ")}`);
  });
});
