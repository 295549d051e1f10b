// Running an operator hook on the machine running molt: a shell command (molt:hooks) with
// a deadline, or a library callback. What the hook gets is in its environment and in files
// that exist only while it runs (0600 in a 0700 directory, removed after): never on a
// command line, and molt's own secrets (the stack passphrase, Pulumi tokens) are not passed.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { HookName } from "../core/model";
import type { SshAccessSettings } from "../core/nodes";
import { LineRedactor } from "../report/redact";

/** What a library hook callback receives (the command gets the same as MOLT_* variables). */
export interface HookContext {
  hook: HookName;
  stack: string;
  node: string;
  /** The node's private address (etcd peer, API server). */
  address?: string;
  ssh?: { host: string; port: number; user: string };
  /** Every node of the stack now. */
  nodes: string[];
  /** An admin kubeconfig for the cluster (Kubernetes stacks), valid while the hook runs. */
  kubeconfig?: string;
  /** An ssh_config naming every node (host keys pinned, the stack's key), valid while the hook runs. */
  sshConfig?: string;
  /** Aborted at the hook's deadline or when the run is cancelled. */
  signal: AbortSignal;
}

export type HookCallback = (ctx: HookContext) => Promise<void>;
export type HookCallbacks = Partial<Record<HookName, HookCallback>>;

/** Variables of molt's own that a hook never inherits. */
const WITHHELD = ["PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_ACCESS_TOKEN"];

export function hookEnv(ctx: Omit<HookContext, "signal">, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of WITHHELD) delete env[k];
  for (const k of Object.keys(env)) if (k.startsWith("MOLT_")) delete env[k];
  delete env.KUBECONFIG;
  return {
    ...env,
    MOLT_HOOK: ctx.hook,
    MOLT_STACK: ctx.stack,
    MOLT_NODE: ctx.node,
    MOLT_NODES: ctx.nodes.join(" "),
    ...(ctx.address ? { MOLT_NODE_ADDRESS: ctx.address } : {}),
    ...(ctx.ssh ? { MOLT_NODE_SSH: `${ctx.ssh.user}@${ctx.ssh.host}:${ctx.ssh.port}` } : {}),
    ...(ctx.sshConfig ? { MOLT_SSH_CONFIG: ctx.sshConfig } : {}),
    ...(ctx.kubeconfig ? { KUBECONFIG: ctx.kubeconfig } : {}),
  };
}

/** A directory of credential files for one hook run; `remove()` deletes it. */
export class HookFiles {
  readonly dir = mkdtempSync(join(tmpdir(), "molt-hook-"));
  write(name: string, content: string): string {
    const path = join(this.dir, name);
    writeFileSync(path, content, { mode: 0o600 });
    return path;
  }
  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface NodeSsh {
  name: string;
  host: string;
  port: number;
  /** The login user (an adopted node's may differ from the stack's). */
  user: string;
  hostPublicKey: string;
}

/** The alias of the jump host in a hook's ssh_config (never a node name: those are DNS-1123 labels). */
export const BASTION_ALIAS = "molt_bastion";

/**
 * An ssh_config with one Host per node (`ssh -F $MOLT_SSH_CONFIG <node>`), host keys pinned,
 * the stack's key offered; with molt:ssh.bastion every node is reached through it
 * (ProxyJump, its host key pinned too), and with molt:ssh.agent the agent's keys
 * ($SSH_AUTH_SOCK) are offered besides the stack's, as molt's own sessions do.
 */
export function writeSshConfig(
  files: HookFiles,
  privateKey: string,
  nodes: NodeSsh[],
  access?: SshAccessSettings,
): string {
  const key = files.write("id", privateKey.endsWith("\n") ? privateKey : privateKey + "\n");
  const b = access?.bastion;
  const known = files.write(
    "known_hosts",
    [
      ...nodes.map((n) => `${n.name} ${n.hostPublicKey.trim()}\n`),
      ...(b ? [`${BASTION_ALIAS} ${b.hostKey.trim()}\n`] : []),
    ].join(""),
  );
  const host = (alias: string, h: { host: string; port: number; user: string }, agent: boolean, jump: boolean) =>
    [
      `Host ${alias}`,
      `  HostName ${h.host}`,
      `  Port ${h.port}`,
      `  User ${h.user}`,
      `  HostKeyAlias ${alias}`,
      `  IdentityFile ${key}`,
      // Only the stack's key, unless the agent's are wanted too (it then offers both).
      `  IdentitiesOnly ${agent ? "no" : "yes"}`,
      `  UserKnownHostsFile ${known}`,
      "  StrictHostKeyChecking yes",
      "  BatchMode yes",
      ...(jump ? [`  ProxyJump ${BASTION_ALIAS}`] : []),
      "",
    ].join("\n");
  const agent = access?.agent ?? false;
  return files.write(
    "ssh_config",
    [
      ...nodes.map((n) => host(n.name, n, agent, b !== undefined)),
      ...(b ? [host(BASTION_ALIAS, b, agent || b.agent, false)] : []),
    ].join("\n"),
  );
}

/** What a hook's output may take of a run's reports (events, the CLI's lines). */
export const HOOK_OUTPUT_LIMITS = {
  /** A longer line is cut (and says so). */
  lineChars: 2048,
  /** Lines reported as they come (`hook-output`) per hook run; then one line says the rest is not shown. */
  liveLines: 1000,
  /** The `hook` event keeps the last lines of the output up to this size, and says how many it left out. */
  keptChars: 8192,
  /** Of a longer line only this much is read (and redacted); the rest of it is dropped. */
  pendingChars: 65536,
} as const;

export interface HookRun {
  ok: boolean;
  /** The output (a callback's: its error's message), redacted, its last lines (HOOK_OUTPUT_LIMITS.keptChars). */
  output: string;
  /** How it failed, in molt's words ("exited 3", "timed out after 15s"): never the hook's own text. */
  error?: string;
}

/**
 * A hook's output on its way to the reports: split into lines per stream, each line
 * redacted (a private key printed over several lines is kept out whole) and cut to
 * HOOK_OUTPUT_LIMITS, reported as it comes, and its last lines kept for the `hook` event.
 */
export class HookOutput {
  private readonly streams = {
    out: { pending: "", dropping: false, redactor: new LineRedactor() },
    err: { pending: "", dropping: false, redactor: new LineRedactor() },
  };
  private readonly kept: string[] = [];
  private keptChars = 0;
  private notKept = 0;
  private live = 0;

  constructor(private readonly onLine: (line: string) => void) {}

  take(which: "out" | "err", chunk: string): void {
    const st = this.streams[which];
    const parts = (st.pending + chunk).split("\n");
    st.pending = parts.pop() ?? "";
    for (const raw of parts) {
      if (st.dropping) st.dropping = false;
      else this.line(which, raw.slice(0, HOOK_OUTPUT_LIMITS.pendingChars));
    }
    if (st.pending.length > HOOK_OUTPUT_LIMITS.pendingChars) {
      if (!st.dropping) this.line(which, st.pending.slice(0, HOOK_OUTPUT_LIMITS.pendingChars));
      st.pending = "";
      st.dropping = true;
    }
  }

  /** The hook ended: a last line without its newline is reported too. */
  end(): void {
    for (const which of ["out", "err"] as const) {
      const st = this.streams[which];
      if (st.pending && !st.dropping) this.line(which, st.pending);
      st.pending = "";
    }
  }

  /** The output kept for the `hook` event, saying how many earlier lines it left out. */
  text(): string {
    const lines = this.kept.join("\n");
    return this.notKept ? `[${this.notKept} earlier line(s) not kept]\n${lines}` : lines;
  }

  private line(which: "out" | "err", raw: string): void {
    const redacted = this.streams[which].redactor.line(raw.endsWith("\r") ? raw.slice(0, -1) : raw);
    if (redacted === undefined) return;
    const max = HOOK_OUTPUT_LIMITS.lineChars;
    const l = redacted.length > max ? `${redacted.slice(0, max)} … [line cut at ${max} characters]` : redacted;
    if (this.live < HOOK_OUTPUT_LIMITS.liveLines) this.onLine(l);
    else if (this.live === HOOK_OUTPUT_LIMITS.liveLines)
      this.onLine(
        `[more than ${HOOK_OUTPUT_LIMITS.liveLines} lines: the rest is not shown as it comes; ` +
          `the hook's result keeps its last ${HOOK_OUTPUT_LIMITS.keptChars / 1024} KiB]`,
      );
    this.live++;
    this.kept.push(l);
    this.keptChars += l.length + 1;
    while (this.keptChars > HOOK_OUTPUT_LIMITS.keptChars && this.kept.length > 1) {
      this.keptChars -= this.kept.shift()!.length + 1;
      this.notKept++;
    }
  }
}

/**
 * Runs `sh -c command` in a process group of its own; at the deadline (or on `signal`) the
 * group gets SIGTERM, then SIGKILL 5 s later. Each output line goes to `onLine` as it comes,
 * redacted and cut (HookOutput). The hook ends when its output closes, not when its shell
 * exits: a process it left running in the background (`cmd &`) still writes there. Such a
 * process is ended at the deadline with the group even after the shell has exited, and one
 * that left the group (`setsid`) has the hook's output cut 2 s after the SIGKILL, so the
 * hook ends in any case.
 */
export function runHookCommand(o: {
  command: string;
  timeoutSeconds: number;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  onLine: (line: string) => void;
}): Promise<HookRun> {
  return new Promise((resolve) => {
    const output = new HookOutput(o.onLine);
    let why: string | undefined;
    const child = spawn("sh", ["-c", o.command], { env: o.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.setEncoding("utf8").on("data", (c: string) => output.take("out", c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => output.take("err", c));
    let killTimer: NodeJS.Timeout | undefined;
    let cutTimer: NodeJS.Timeout | undefined;
    const killGroup = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* the group is gone */
      }
    };
    const stop = (reason: string) => {
      if (why !== undefined || child.pid === undefined) return;
      // Its shell may have exited already: what holds the hook open is then a process it left.
      why =
        child.exitCode !== null
          ? `${reason}: its shell exited ${child.exitCode}, but a process it started kept its output open`
          : reason;
      killGroup("SIGTERM");
      killTimer = setTimeout(() => {
        killGroup("SIGKILL");
        cutTimer = setTimeout(() => {
          child.stdout.destroy();
          child.stderr.destroy();
        }, 2000);
      }, 5000);
    };
    // The hook's deadline: a timer that ends the hook, not a sleep.
    const deadline = setTimeout(() => stop(`timed out after ${o.timeoutSeconds}s`), o.timeoutSeconds * 1000);
    const onAbort = () => stop("was cancelled");
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const done = (r: Omit<HookRun, "output">) => {
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      if (cutTimer) clearTimeout(cutTimer);
      o.signal?.removeEventListener("abort", onAbort);
      output.end();
      resolve({ ...r, output: output.text() });
    };
    child.on("error", (e) => done({ ok: false, error: `could not start: ${e.message}` }));
    child.on("close", (code, sig) => {
      if (why !== undefined) return done({ ok: false, error: why });
      if (code === 0) return done({ ok: true });
      done({ ok: false, error: code !== null ? `exited ${code}` : `was killed by ${sig}` });
    });
  });
}

/**
 * Runs a library callback with the hook's deadline: its signal aborts then, and the hook
 * fails. A rejection's message is the callback's own text: its output, not its error.
 */
export async function runHookCallback(
  fn: HookCallback,
  ctx: Omit<HookContext, "signal">,
  timeoutSeconds: number,
  signal?: AbortSignal,
): Promise<HookRun> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(new Error("cancelled"));
  signal?.addEventListener("abort", onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  const late = `timed out after ${timeoutSeconds}s`;
  let timedOut = false;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // Failed first: a callback that returns once aborted has not passed.
      timedOut = true;
      reject(new Error(late));
      ac.abort(new Error(late));
    }, timeoutSeconds * 1000);
  });
  try {
    await Promise.race([fn({ ...ctx, signal: ac.signal }), deadline]);
    if (timedOut) return { ok: false, output: "", error: late };
    return { ok: true, output: "" };
  } catch (e) {
    if (timedOut) return { ok: false, output: "", error: late };
    if (signal?.aborted) return { ok: false, output: "", error: "was cancelled" };
    const output = new HookOutput(() => undefined);
    output.take("err", e instanceof Error ? e.message : String(e));
    output.end();
    return { ok: false, output: output.text(), error: "threw an error" };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
