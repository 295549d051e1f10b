// `molt --version` / `-V` / `molt version`: molt's own version, the Pulumi engine molt would
// run (located as a run locates it) and Node.js's. A missing engine is said, not an error:
// the command answers what is installed.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EngineMissingError, locateEngine, repoRoot } from "../stack/engine";

export interface Versions {
  molt: string;
  /** The engine's version and where it is, or why there is none. */
  engine: { version: string; path: string } | { missing: string };
  node: string;
}

export function versions(locate: () => { binDir: string; version: string } = locateEngine): Versions {
  const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version?: unknown };
  let engine: Versions["engine"];
  try {
    const e = locate();
    engine = { version: e.version, path: join(e.binDir, "pulumi") };
  } catch (e) {
    if (!(e instanceof EngineMissingError)) throw e;
    engine = { missing: e.message.split("\n")[0].replace(/^no usable Pulumi engine: /, "") };
  }
  return { molt: String(pkg.version), engine, node: process.versions.node };
}

export function versionText(v: Versions): string {
  return (
    [
      `molt ${v.molt}`,
      "version" in v.engine
        ? `pulumi ${v.engine.version} (${v.engine.path})`
        : `pulumi: none found (${v.engine.missing}); run \`bash tools/setup.sh\``,
      `node ${v.node}`,
    ].join("\n") + "\n"
  );
}
