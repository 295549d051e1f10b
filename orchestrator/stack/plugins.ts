// The engine's resource plugins a stack's provider needs (infra/providers/registry.ts),
// checked before any `up`. molt never lets the engine download a plugin during a rollout
// (PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION, engine.ts): a missing one is set-up the
// user does once, with the one command this error names, and nothing is changed before.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import type { PluginRequirement } from "../../infra/providers/provider";
import { providerOf } from "../../infra/providers/registry";
import { engineEnv, locateEngine, type Engine } from "./engine";

export interface InstalledPlugin {
  name: string;
  kind: string;
  version?: string;
}

/** The command that installs `p` into the engine molt uses. */
export function installCommand(p: PluginRequirement): string {
  return `npm run pulumi -- plugin install ${p.kind} ${p.name} ${p.version}`;
}

export class PluginMissingError extends Error {
  constructor(
    readonly provider: string,
    readonly missing: readonly PluginRequirement[],
  ) {
    super(
      `stacks of provider ${provider} need the Pulumi ` +
        `${missing.map((p) => `${p.kind} plugin ${p.name} ${p.version}`).join(", ")}, ` +
        `which is not installed where molt runs; nothing was changed. Install it once with:\n` +
        missing.map((p) => `  ${installCommand(p)}\n`).join("") +
        `(molt never lets the engine download plugins during a rollout. Without internet access, copy the plugin's ` +
        `release archive here and add --file <archive> to that command; see docs/clouds.md.)`,
    );
    this.name = "PluginMissingError";
  }
}

/** The required plugins that are neither installed at their exact version nor on PATH (ambient). */
export function missingPlugins(
  required: readonly PluginRequirement[],
  installed: readonly InstalledPlugin[],
  onPath: (binary: string) => boolean = () => false,
): PluginRequirement[] {
  return required.filter(
    (p) =>
      !installed.some((i) => i.kind === p.kind && i.name === p.name && i.version?.replace(/^v/, "") === p.version) &&
      !onPath(`pulumi-${p.kind}-${p.name}`),
  );
}

/** `pulumi plugin ls --json` of the engine molt uses, in the environment it runs the engine with. */
export function installedPlugins(engine: Engine, env: Record<string, string> = {}): InstalledPlugin[] {
  const out = execFileSync(join(engine.binDir, "pulumi"), ["plugin", "ls", "--json"], {
    encoding: "utf8",
    env: { ...process.env, ...engineEnv(engine, env) },
    stdio: ["ignore", "pipe", "pipe"],
    timeout: 60_000,
  });
  const parsed = JSON.parse(out.trim() || "[]") as unknown;
  if (!Array.isArray(parsed)) throw new Error(`\`pulumi plugin ls --json\` printed no list: ${out.slice(0, 200)}`);
  return parsed as InstalledPlugin[];
}

/** Throws PluginMissingError when the engine lacks a plugin `provider`'s stacks need. */
export function checkProviderPlugins(provider: string, env: Record<string, string> = {}): void {
  const required = providerOf(provider)?.plugins ?? [];
  if (required.length === 0) return;
  const engine = locateEngine();
  const path = `${engine.binDir}${delimiter}${process.env.PATH ?? ""}`;
  const onPath = (binary: string) => path.split(delimiter).some((d) => d !== "" && existsSync(join(d, binary)));
  const missing = missingPlugins(required, installedPlugins(engine, env), onPath);
  if (missing.length) throw new PluginMissingError(provider, missing);
}
