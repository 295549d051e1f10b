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

const KEEP_OUTPUT = 64 * 1024;

export interface HookRun {
  ok: boolean;
  output: string;
  error?: string;
}

/**
 * Runs `sh -c command` in a process group of its own; at the deadline (or on `signal`) the
 * group gets SIGTERM, then SIGKILL 5 s later. Each output line goes to `onLine` as it comes.
 */
export function runHookCommand(o: {
  command: string;
  timeoutSeconds: number;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  onLine: (line: string) => void;
}): Promise<HookRun> {
  return new Promise((resolve) => {
    let output = "";
    let why: string | undefined;
    const child = spawn("sh", ["-c", o.command], { env: o.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const pending: Record<"out" | "err", string> = { out: "", err: "" };
    const take = (which: "out" | "err") => (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-KEEP_OUTPUT);
      const lines = (pending[which] + chunk.toString()).split("\n");
      pending[which] = lines.pop() ?? "";
      for (const l of lines) o.onLine(l);
    };
    child.stdout.on("data", take("out"));
    child.stderr.on("data", take("err"));
    let killTimer: NodeJS.Timeout | undefined;
    const stop = (reason: string) => {
      if (why !== undefined || child.exitCode !== null) return;
      why = reason;
      try {
        process.kill(-child.pid!, "SIGTERM");
      } catch {
        /* already gone */
      }
      killTimer = setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          /* already gone */
        }
      }, 5000);
    };
    // The hook's deadline: a timer that ends the hook, not a sleep.
    const deadline = setTimeout(() => stop(`timed out after ${o.timeoutSeconds}s`), o.timeoutSeconds * 1000);
    const onAbort = () => stop("cancelled");
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const done = (r: HookRun) => {
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      o.signal?.removeEventListener("abort", onAbort);
      for (const w of ["out", "err"] as const) if (pending[w]) o.onLine(pending[w]);
      resolve(r);
    };
    child.on("error", (e) => done({ ok: false, output, error: `could not start: ${e.message}` }));
    child.on("close", (code, sig) => {
      if (why !== undefined) return done({ ok: false, output, error: why });
      if (code === 0) return done({ ok: true, output });
      done({ ok: false, output, error: code !== null ? `exited ${code}` : `killed by ${sig}` });
    });
  });
}

/** Runs a library callback with the hook's deadline: its signal aborts then, and the hook fails. */
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
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      ac.abort(new Error(`timed out after ${timeoutSeconds}s`));
      reject(new Error(`timed out after ${timeoutSeconds}s`));
    }, timeoutSeconds * 1000);
  });
  try {
    await Promise.race([fn({ ...ctx, signal: ac.signal }), deadline]);
    return { ok: true, output: "" };
  } catch (e) {
    return { ok: false, output: "", error: (e as Error).message };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}
