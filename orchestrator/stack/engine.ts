// Where molt finds the Pulumi engine and how it configures it for offline, file-backed use.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync, chmodSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import * as semver from "semver";
import { engineBackendUrl } from "../backend/file-sidecars";

const repoRoot = resolve(__dirname, "..", "..", "..");

function readVersions(): { PULUMI_VERSION: string; PULUMI_MIN_VERSION: string } {
  const text = readFileSync(join(repoRoot, "tools", "versions.env"), "utf8");
  const get = (k: string) => {
    const m = new RegExp(`^${k}=(.+)$`, "m").exec(text);
    if (!m) throw new Error(`tools/versions.env has no ${k}`);
    return m[1].trim();
  };
  return { PULUMI_VERSION: get("PULUMI_VERSION"), PULUMI_MIN_VERSION: get("PULUMI_MIN_VERSION") };
}

export class EngineMissingError extends Error {
  constructor(detail: string) {
    super(
      `no usable Pulumi engine: ${detail}\n` +
        `  Run \`bash tools/setup.sh\` (builds the pinned engine from Go modules when no Pulumi is installed), ` +
        `or install Pulumi >= ${readVersions().PULUMI_MIN_VERSION} and put it on PATH, or set MOLT_PULUMI to its path.`,
    );
    this.name = "EngineMissingError";
  }
}

export function cacheDir(): string {
  return process.env.MOLT_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "molt");
}

/**
 * `bin version`, remembered in the cache folder by the file's identity (device, inode, size,
 * change time: a rebuilt, replaced or upgraded engine is asked again). Asking costs a start
 * of the engine, paid by every run before its first engine command.
 */
function versionOf(bin: string): string | undefined {
  let id: string;
  try {
    const s = statSync(bin);
    id = `${s.dev}:${s.ino}:${s.size}:${s.ctimeMs}`;
  } catch {
    return undefined;
  }
  const file = join(cacheDir(), "engine-versions.json");
  const known = readKnownVersions(file);
  if (known[bin]?.id === id) return known[bin].version;
  let version: string;
  try {
    version = execFileSync(bin, ["version"], {
      encoding: "utf8",
      env: { ...process.env, PULUMI_SKIP_UPDATE_CHECK: "true" },
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 30_000,
    })
      .trim()
      .replace(/^v/, "");
  } catch {
    return undefined;
  }
  // Only a version worth remembering; a cache that cannot be written is asked again next time.
  if (semver.valid(version)) {
    try {
      mkdirSync(dirname(file), { recursive: true });
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify({ ...known, [bin]: { id, version } }) + "\n");
      renameSync(tmp, file);
    } catch {
      // not cached
    }
  }
  return version;
}

function readKnownVersions(file: string): Record<string, { id: string; version: string }> {
  try {
    const parsed = JSON.parse(readFileSync(file, "utf8")) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return {};
    const out: Record<string, { id: string; version: string }> = {};
    for (const [bin, v] of Object.entries(parsed as Record<string, unknown>)) {
      const e = v as { id?: unknown; version?: unknown } | null;
      if (typeof e?.id === "string" && typeof e.version === "string" && semver.valid(e.version))
        out[bin] = { id: e.id, version: e.version };
    }
    return out;
  } catch {
    return {};
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const p = join(dir, name);
    if (dir && existsSync(p)) return p;
  }
  return undefined;
}

export interface Engine {
  /** Directory holding `pulumi` (and, for the built engine, the dynamic provider launcher). */
  binDir: string;
  version: string;
}

/** Same order as tools/setup-engine.sh: $MOLT_PULUMI, a suitable `pulumi` on PATH, the cached build. */
export function locateEngine(): Engine {
  const { PULUMI_VERSION, PULUMI_MIN_VERSION } = readVersions();
  const tried: string[] = [];
  // An engine named explicitly is the one to use: never silently another.
  const explicit = process.env.MOLT_PULUMI;
  if (explicit) {
    const v = existsSync(explicit) ? versionOf(explicit) : undefined;
    if (v && semver.valid(v) && semver.gte(v, PULUMI_MIN_VERSION)) return { binDir: dirname(explicit), version: v };
    const why = !existsSync(explicit)
      ? "no such file"
      : v && semver.valid(v)
        ? `version ${v} is older than ${PULUMI_MIN_VERSION}`
        : `\`${explicit} version\` printed ${v ? JSON.stringify(v.slice(0, 60)) : "no version"}`;
    throw new EngineMissingError(
      `MOLT_PULUMI=${explicit} is not a usable Pulumi engine (${why}); point it at a pulumi binary or unset it`,
    );
  }
  const candidates = [onPath("pulumi"), join(cacheDir(), "toolchain", `pulumi-${PULUMI_VERSION}`, "bin", "pulumi")];
  for (const c of candidates) {
    if (!c || !existsSync(c)) continue;
    const v = versionOf(c);
    if (v && semver.valid(v) && semver.gte(v, PULUMI_MIN_VERSION)) return { binDir: dirname(c), version: v };
    tried.push(`${c} (version ${v ?? "unknown"})`);
  }
  throw new EngineMissingError(
    tried.length ? `found only ${tried.join(", ")}` : "none on PATH and none built in " + cacheDir(),
  );
}

export function moltHome(): string {
  return process.env.MOLT_HOME ?? join(homedir(), ".molt");
}

/**
 * The backend: PULUMI_BACKEND_URL if the user set one, else a file backend under ~/.molt,
 * whose folder is made unless `create` is false (a read-only command writes nothing).
 */
export function backendUrl(o: { create?: boolean } = {}): string {
  if (process.env.PULUMI_BACKEND_URL) return process.env.PULUMI_BACKEND_URL;
  const dir = join(moltHome(), "state");
  if (o.create !== false) mkdirSync(dir, { recursive: true });
  return `file://${dir}`;
}

/**
 * Passphrase for the passphrase secrets provider: PULUMI_CONFIG_PASSPHRASE or
 * PULUMI_CONFIG_PASSPHRASE_FILE if set; otherwise ~/.molt/passphrase, created (0600,
 * random) on first use so the lab works out of the box. Back that file up: without it
 * the stack's secrets (SSH keys, CA keys) cannot be decrypted.
 */
export function passphraseEnv(backend?: string): Record<string, string> {
  if (process.env.PULUMI_CONFIG_PASSPHRASE !== undefined)
    return { PULUMI_CONFIG_PASSPHRASE: process.env.PULUMI_CONFIG_PASSPHRASE };
  if (process.env.PULUMI_CONFIG_PASSPHRASE_FILE)
    return { PULUMI_CONFIG_PASSPHRASE_FILE: process.env.PULUMI_CONFIG_PASSPHRASE_FILE };
  const file = join(moltHome(), "passphrase");
  // A shared backend's secrets must open on every runner: a passphrase made up here would
  // exist on this machine only.
  // No passphrase is given to the engine then: a passphrase stack is refused by it ("passphrase
  // must be set", exit 2), a stack with a KMS secrets provider needs none.
  if (!existsSync(file) && backend && !backend.startsWith("file://")) return {};
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, randomBytes(32).toString("base64url") + "\n", { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  return { PULUMI_CONFIG_PASSPHRASE_FILE: file };
}

/** Environment for every engine process: offline-safe, and MOLT_DIST for dynamic providers. */
export function engineEnv(engine: Engine, overrides: Record<string, string> = {}): Record<string, string> {
  const hasPassphrase = "PULUMI_CONFIG_PASSPHRASE" in overrides || "PULUMI_CONFIG_PASSPHRASE_FILE" in overrides;
  const backend = overrides.PULUMI_BACKEND_URL ?? backendUrl();
  return {
    PULUMI_SKIP_UPDATE_CHECK: "true",
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true",
    MOLT_DIST: resolve(__dirname, "..", ".."),
    // The dynamic provider each `up` starts is a node process that loads @pulumi/pulumi and
    // molt's modules: V8's compiled code cached on disk saves a good part of that start.
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(cacheDir(), "node-compile-cache"),
    // ... written once the provider has started (stack/compile-cache.ts; the engine kills it).
    NODE_OPTIONS: [process.env.NODE_OPTIONS, `--require=${JSON.stringify(join(__dirname, "compile-cache.js"))}`]
      .filter(Boolean)
      .join(" "),
    PATH: `${engine.binDir}${delimiter}${process.env.PATH ?? ""}`,
    ...(hasPassphrase ? {} : passphraseEnv(backend)),
    ...overrides,
    // A file backend without fileblob's metadata sidecars (backend/file-sidecars.ts).
    PULUMI_BACKEND_URL: engineBackendUrl(backend),
  };
}

export const distDir = resolve(__dirname, "..", "..");
export { repoRoot };
