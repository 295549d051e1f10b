// The README upgrade on molt's code as it was when issue #30 was filed ("then"), for goal 4's
// ratio in the same bench run: that commit's tree under ~/.cache/molt/bench-then/<commit>,
// built with this checkout's node_modules, its own lab images (its tools/lab/build-images.sh)
// in a lab root of their own, and its own `bench --only k8s` run as a child process on lab b7.
// Its results are read from the JSON it writes. Nothing of the earlier code is changed but
// one line of its bench: the lab its Kubernetes scenario uses (b6, hard-wired then), so that
// it does not share a lab with this run's.
import { spawn, spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { ThenTraceLine } from "./then-trace";

/** The commit "then" is: the end of session 14, the code when issue #30 was filed. */
export const THEN_COMMIT = "7f7343871746e35aee8c2e29f2988bc2c406db76";
export const THEN_LAB_ID = 7;

/** The one line of the earlier bench that changes: its Kubernetes scenario's lab. */
const LAB_LINE = 'const l = lab(6);\n  const wd = makeWorkDir("molt-bench-k8s-");';
const LAB_LINE_NOW =
  "const l = lab(Number(process.env.MOLT_BENCH_K8S_LAB ?? 6));\n" + '  const wd = makeWorkDir("molt-bench-k8s-");';

export interface ThenPrepared {
  commit: string;
  dir: string;
  labRoot: string;
  /** The source the images are keyed by: the tree hash of the commit's tools/. */
  imagesKey: string;
  reusedCheckout: boolean;
  checkoutMs: number;
  buildMs: number;
  imagesMs: number;
  /** build-images.sh's verdict per image: "present" or "built ...". */
  images: string[];
}

export interface ThenKube {
  wallMs: number;
  createWallMs: number;
  phases: Record<string, number>;
  kubeOpsMs: Record<string, number>;
  surgeUpMs: number[];
  pruneUpMs: number[];
  api: { requests: number; failures: number; longestOutageMs: number };
}

export interface ThenRun {
  kube: ThenKube;
  /** The earlier bench's own table rows. */
  table: [string, string][];
  /**
   * SSH commands the earlier code sent during the upgrade (its last rollout), by process:
   * "bench/run.js" (the orchestrator), "dynamic-provider/index.js" (the engine's providers).
   */
  upgradeSsh: Record<string, { count: number; msTotal: number; msMedian: number }>;
  childWallMs: number;
}

const cacheRoot = () => process.env.MOLT_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "molt");

function run(cmd: string, args: string[], o: { cwd?: string; env?: NodeJS.ProcessEnv }, what: string): string {
  const r = spawnSync(cmd, args, { ...o, encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new Error(`bench then: ${what} failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout).slice(-2000)}`);
  return r.stdout;
}

/**
 * `commit`'s tree of `repo` written into `dest` (git archive piped into tar). With pipefail: a
 * git archive that fails after tar read a whole archive (or what looks like one) fails the
 * checkout, rather than leave a tree nobody can tell from a good one.
 */
export function extractCommit(repo: string, commit: string, dest: string, env?: NodeJS.ProcessEnv): void {
  run(
    "bash",
    ["-c", 'set -o pipefail; git -C "$1" archive --format=tar "$2" | tar -x -C "$3"', "_", repo, commit, dest],
    env ? { env } : {},
    "git archive",
  );
}

/**
 * Each entry of the shared toolchain linked into `toolchain` (but lab-kubelet-current, which
 * the earlier build-kube.sh repoints itself). An entry already there is kept, and so is a link
 * that resolves; a link that dangles (lstat sees it, existsSync follows it and would not, and
 * symlinkSync then fails with EEXIST) is replaced. Returns the entries linked.
 */
export function linkToolchain(shared: string, toolchain: string): string[] {
  const linked: string[] = [];
  for (const e of readdirSync(shared)) {
    if (e === "lab-kubelet-current") continue;
    const at = join(toolchain, e);
    const present = lstatOrUndefined(at);
    if (present && !(present.isSymbolicLink() && !resolves(at))) continue;
    if (present) rmSync(at);
    symlinkSync(join(shared, e), at);
    linked.push(e);
  }
  return linked;
}

function lstatOrUndefined(p: string): ReturnType<typeof lstatSync> | undefined {
  try {
    return lstatSync(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

function resolves(p: string): boolean {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * The earlier commit checked out (git archive, once), built, and its lab images present. A
 * checkout already there is reused; the build (tsc -b) and build-images.sh run each time and
 * do nothing when nothing changed.
 */
export function prepareThen(repo: string, labRootNow: string): ThenPrepared {
  const commit = THEN_COMMIT;
  const base = join(cacheRoot(), "bench-then");
  const dir = join(base, commit);
  const marker = join(dir, ".bench-then.json");
  let t = Date.now();
  const reusedCheckout = existsSync(marker);
  if (!reusedCheckout) {
    rmSync(dir, { recursive: true, force: true });
    const tmp = `${dir}.tmp`;
    rmSync(tmp, { recursive: true, force: true });
    mkdirSync(tmp, { recursive: true });
    extractCommit(repo, commit, tmp);
    const bench = join(tmp, "bench", "run.ts");
    const src = readFileSync(bench, "utf8");
    if (src.split(LAB_LINE).length !== 2)
      throw new Error(`bench then: ${commit}'s bench/run.ts has no single k8s lab line`);
    writeFileSync(bench, src.replace(LAB_LINE, LAB_LINE_NOW));
    // Its dependencies are a subset of today's at the same versions (package-lock.json only gained entries).
    symlinkSync(realpathSync(join(repo, "node_modules")), join(tmp, "node_modules"));
    renameSync(tmp, dir);
  }
  const checkoutMs = Date.now() - t;

  t = Date.now();
  run(
    process.execPath,
    [join(dir, "node_modules", "typescript", "bin", "tsc"), "-b", "tsconfig.json"],
    { cwd: dir },
    "tsc -b",
  );
  const buildMs = Date.now() - t;
  if (!reusedCheckout) writeFileSync(marker, JSON.stringify({ commit, labLine: LAB_LINE_NOW }) + "\n");

  // Its images differ from today's under the same names (its lab-kubelet backs off): a lab root
  // of their own, keyed by the tree of its tools/ (build scripts, kubelet source, versions).
  const imagesKey = run("git", ["-C", repo, "rev-parse", `${commit}:tools`], {}, "git rev-parse").trim();
  const labRoot = `${labRootNow}-then/${imagesKey.slice(0, 12)}`;
  // Its build-kube.sh repoints toolchain/lab-kubelet-current: a toolchain dir of its own whose
  // entries are today's (the same Kubernetes and etcd builds, and its lab-kubelet if built).
  const toolchain = join(base, `cache-${imagesKey.slice(0, 12)}`, "toolchain");
  mkdirSync(toolchain, { recursive: true });
  linkToolchain(join(cacheRoot(), "toolchain"), toolchain);
  t = Date.now();
  const log = run(
    "bash",
    [join(dir, "tools", "lab", "build-images.sh")],
    {
      cwd: dir,
      env: {
        ...process.env,
        MOLT_LAB_ROOT: labRoot,
        MOLT_CACHE: join(base, `cache-${imagesKey.slice(0, 12)}`),
        MOLT_LAB_ETCD_ONLY: "0",
      },
    },
    "its tools/lab/build-images.sh",
  );
  const imagesMs = Date.now() - t;
  const images = log
    .split("\n")
    .filter((l) => /^[\w.-]+: (present|built)/.test(l))
    .map((l) => l.trim());
  return { commit, dir, labRoot, imagesKey, reusedCheckout, checkoutMs, buildMs, imagesMs, images };
}

/** Its `bench --only k8s` as a child on lab b7; its lines are printed with a prefix as they come. */
export async function runThen(p: ThenPrepared, outDir: string, print: (line: string) => void): Promise<ThenRun> {
  const results = join(p.dir, "bench", "results");
  const json = join(results, "latest-partial.json");
  const tracePath = join(p.dir, "bench-then-trace.jsonl");
  rmSync(json, { force: true });
  rmSync(tracePath, { force: true });
  const t = Date.now();
  const child = spawn(process.execPath, [join("dist", "bench", "run.js"), "--only", "k8s"], {
    cwd: p.dir,
    env: {
      ...process.env,
      // Every Node process of its run: the engine's providers run its SSH commands too.
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --require ${join(__dirname, "then-trace.js")}`.trim(),
      MOLT_LAB_ROOT: p.labRoot,
      MOLT_BENCH_K8S_LAB: String(THEN_LAB_ID),
      MOLT_BENCH_THEN_TRACE: tracePath,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let partial = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    const lines = (partial + d).split("\n");
    partial = lines.pop() ?? "";
    for (const l of lines) print(`  [then] ${l}`);
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr = (stderr + d).slice(-4000)));
  const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
  if (partial) print(`  [then] ${partial}`);
  const childWallMs = Date.now() - t;
  if (code !== 0) throw new Error(`bench then: ${p.commit.slice(0, 7)}'s bench --only k8s exited ${code}: ${stderr}`);
  const out = JSON.parse(readFileSync(json, "utf8")) as { kube?: ThenKube; table: [string, string][] };
  if (!out.kube) throw new Error(`bench then: ${json} has no kube result`);
  if (existsSync(join(results, "timeline-k8s.svg")))
    copyFileSync(join(results, "timeline-k8s.svg"), join(outDir, "timeline-k8s-then.svg"));
  const trace = existsSync(tracePath)
    ? readFileSync(tracePath, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ThenTraceLine)
    : [];
  return { kube: out.kube, table: out.table, upgradeSsh: upgradeSshOf(trace), childWallMs };
}

/**
 * The SSH commands sent during the last rollout of a trace (the upgrade: the bench's first
 * rollout creates the cluster), by process: count, median and sum of their times.
 */
export function upgradeSshOf(trace: readonly ThenTraceLine[]): ThenRun["upgradeSsh"] {
  const up = trace.filter((x) => x.kind === "rollout").pop();
  const by: Record<string, number[]> = {};
  for (const x of trace)
    if (x.kind === "exec" && up && x.at >= up.start && x.at <= up.end) (by[x.process] ??= []).push(x.ms);
  return Object.fromEntries(
    Object.entries(by).map(([proc, ms]) => {
      const sorted = [...ms].sort((a, b) => a - b);
      return [
        proc,
        { count: ms.length, msTotal: ms.reduce((a, b) => a + b, 0), msMedian: sorted[Math.floor(ms.length / 2)] },
      ];
    }),
  );
}

/**
 * What one SSH command of the earlier code paid for the host's /root/.bashrc (its lab machines
 * shared the host's /root until 34eb517; bash sources ~/.bashrc for a command sshd runs): the
 * median of 5 fresh shells sourcing it, less a shell that does not.
 */
export function bashrcCostMs(): { ms: number; pyenvLock: boolean } {
  const time = (script: string) => {
    const xs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = process.hrtime.bigint();
      spawnSync("bash", ["--norc", "-c", script], { stdio: "ignore", env: { ...process.env, HOME: homedir() } });
      xs.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    return xs.sort((a, b) => a - b)[2];
  };
  const rc = join(homedir(), ".bashrc");
  const ms = existsSync(rc) ? time(`. ${rc}`) - time(":") : 0;
  // pyenv's rehash lock, left behind, makes every sourcing wait 60 s for it.
  const pyenvLock = existsSync(join(process.env.PYENV_ROOT ?? join(homedir(), ".pyenv"), "shims", ".pyenv-shim"));
  return { ms: Math.round(ms), pyenvLock };
}
