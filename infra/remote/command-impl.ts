// Runtime of RemoteCommand (loaded by the dynamic provider through MOLT_DIST).
import { randomUUID } from "node:crypto";
import { RemoteCommandError, SshSession, envPrefix, shellQuote } from "./ssh";
import type { RemoteCommandInputs, RemoteCommandOutputs } from "./command";
import { isDeepStrictEqual } from "node:util";

/** How long a node's sshd may take to accept the first connection. */
const CONNECT_DEADLINE_MS = 120_000;

async function connectWithDeadline(c: RemoteCommandInputs["connection"]): Promise<SshSession> {
  const deadline = Date.now() + CONNECT_DEADLINE_MS;
  let last: unknown;
  let backoff = 100;
  while (Date.now() < deadline) {
    try {
      return await SshSession.connect(c, { readyTimeoutMs: Math.min(20_000, deadline - Date.now()) });
    } catch (e) {
      if (e instanceof Error && e.name === "HostKeyMismatchError") throw e;
      last = e;
      // Poll backoff while the node boots; bounded by the deadline above.
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 2_000);
    }
  }
  throw new Error(
    `could not reach ${c.host}:${c.port ?? 22} over SSH within ${CONNECT_DEADLINE_MS / 1000}s: ${String(last)}`,
  );
}

async function runScript(
  inputs: RemoteCommandInputs,
  script: string,
  what: string,
  stdin?: string,
): Promise<{ stdout: string; stderr: string }> {
  const ssh = await connectWithDeadline(inputs.connection);
  try {
    const env = envPrefix(inputs.environment ?? {});
    const cmd = `${env}exec bash -euo pipefail -c ${shellQuote(script)}`;
    const r = await ssh.exec(cmd, { stdin: stdin ?? "" });
    if (r.code !== 0) throw new RemoteCommandError(inputs.connection.host, what, r.code, r.stderr);
    return { stdout: r.stdout, stderr: r.stderr };
  } finally {
    ssh.close();
  }
}

export async function create(
  inputs: RemoteCommandInputs,
): Promise<{ id: string; outs: RemoteCommandInputs & RemoteCommandOutputs }> {
  const t0 = Date.now();
  const { stdout, stderr } = await runScript(inputs, inputs.create, "create script", inputs.stdin);
  // Scripts log progress on stderr (never secrets); the tail is kept for diagnosis.
  return {
    id: randomUUID(),
    outs: { ...inputs, stdout: stdout.slice(-4096), stderr: stderr.slice(-4096), createMs: Date.now() - t0 },
  };
}

export function diff(olds: RemoteCommandInputs, news: RemoteCommandInputs) {
  const replace = !isDeepStrictEqual(olds.triggers ?? [], news.triggers ?? []);
  return { changes: replace, replaces: replace ? ["triggers"] : [], deleteBeforeReplace: true };
}

export async function remove(props: RemoteCommandInputs): Promise<void> {
  if (!props.delete) return;
  await runScript(props, props.delete, "delete script");
}
