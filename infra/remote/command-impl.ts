// Runtime of RemoteCommand (loaded by the dynamic provider through MOLT_DIST).
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { connectDuringFirstBoot, connectRotating } from "./host-key-rotation";
import { RemoteCommandError, SshSession, envPrefix, shellQuote, type ExecResult, type SshTarget } from "./ssh";
import type { RemoteCommandInputs, RemoteCommandOutputs } from "./command";
import { formatTeardownWarning, teardownSkipFor } from "./teardown";

/** How long a node's sshd may take to accept the first connection. */
const CONNECT_DEADLINE_MS = 120_000;

/**
 * How long a node molt already saw dead (no etcd member, SSH not answering) gets to
 * answer before its teardown is skipped: a second look, not a wait for a boot.
 */
const DEAD_NODE_CONNECT_MS = 10_000;

const connect = (t: SshTarget) => SshSession.connect(t, { readyTimeoutMs: 20_000 });
const connectBriefly = (t: SshTarget) => SshSession.connect(t, { readyTimeoutMs: 5_000 });

/** How a script runs on a node: its environment exported, under bash with strict options. */
export function commandLine(inputs: Pick<RemoteCommandInputs, "environment">, script: string): string {
  // --norc: Debian's bash sources /etc/bash.bashrc for commands sshd starts (SSH_SOURCE_BASHRC),
  // whose `[ -z "$PS1" ]` fails under -u before the script's first line.
  return `${envPrefix(inputs.environment ?? {})}exec bash --norc --noprofile -euo pipefail -c ${shellQuote(script)}`;
}

async function runScript(
  ssh: SshSession,
  inputs: RemoteCommandInputs,
  script: string,
  what: string,
  stdin?: string,
): Promise<{ stdout: string; stderr: string }> {
  try {
    const r = await ssh.exec(commandLine(inputs, script), { stdin: stdin ?? "" });
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
  // The machine may still be booting: this is the first connection to it.
  const { session, hostKey } = inputs.rotateHostKey
    ? await connectRotating(inputs.connection, { deadlineMs: CONNECT_DEADLINE_MS, connect })
    : {
        session: await connectDuringFirstBoot(inputs.connection, CONNECT_DEADLINE_MS, connect),
        hostKey: inputs.connection.hostKey,
      };
  const { stdout, stderr } = await runScript(session, inputs, inputs.create, "create script", inputs.stdin);
  // Scripts log progress on stderr (never secrets); the tail is kept for diagnosis. The
  // stored connection pins the key the node offers now (delete connects with it).
  return {
    id: randomUUID(),
    outs: {
      ...inputs,
      connection: { ...inputs.connection, hostKey },
      hostKey,
      stdout: stdout.slice(-4096),
      stderr: stderr.slice(-4096),
      createMs: Date.now() - t0,
    },
  };
}

export function diff(olds: RemoteCommandInputs, news: RemoteCommandInputs) {
  const replace = !isDeepStrictEqual(olds.triggers ?? [], news.triggers ?? []);
  return { changes: replace, replaces: replace ? ["triggers"] : [], deleteBeforeReplace: true };
}

type Connection = RemoteCommandInputs["connection"];

/** What the delete needs from the outside world (replaced by fakes in unit tests). */
export interface TeardownEdges {
  connect(c: Connection, deadlineMs: number): Promise<Pick<SshSession, "exec" | "close">>;
  env: NodeJS.ProcessEnv;
  /** Where reports go: the engine turns the delete's stderr lines into diagnostics. */
  warn(line: string): void;
}

const realEdges: TeardownEdges = {
  connect: (c, deadlineMs) =>
    connectDuringFirstBoot(c, deadlineMs, deadlineMs < CONNECT_DEADLINE_MS ? connectBriefly : connect, {
      retryHostKeyMismatch: false,
    }),
  env: process.env,
  warn: (line) => void process.stderr.write(line),
};

/**
 * The delete: the teardown script of a node whose machine is destroyed next (see
 * infra/remote/teardown.ts for when it is skipped and why a failure is tolerated).
 */
export async function remove(props: RemoteCommandInputs, edges: TeardownEdges = realEdges): Promise<void> {
  if (!props.delete) return;
  const c = props.connection;
  const skip = teardownSkipFor(c, edges.env);
  // A machine molt owns and destroys in this `up`: nothing on it is torn down first.
  if (skip?.when === "destroyed") return;
  const who = skip?.name ?? props.environment?.NODE_NAME ?? c.host;
  let ssh: Pick<SshSession, "exec" | "close">;
  try {
    ssh = await edges.connect(c, skip ? DEAD_NODE_CONNECT_MS : CONNECT_DEADLINE_MS);
  } catch (e) {
    if (!skip) throw e;
    edges.warn(
      formatTeardownWarning(
        who,
        `teardown skipped: ${who} has no etcd member and did not answer over SSH at ${c.host}:${c.port ?? 22} ` +
          `(${(e as Error).message.split("\n")[0]}); its machine is destroyed without a reset`,
      ),
    );
    return;
  }
  let failure: string | undefined;
  try {
    const r: ExecResult = await ssh.exec(commandLine(props, props.delete));
    if (r.code !== 0) {
      const tail = r.stderr.trim().split("\n").slice(-5).join(" | ");
      failure = `exit ${r.code ?? "signal"}; last lines: ${tail || "(none)"}`;
    }
  } catch (e) {
    // The session dropped halfway (the node died under it): the same as a failed script.
    failure = `the SSH session failed: ${(e as Error).message.split("\n")[0]}`;
  } finally {
    ssh.close();
  }
  if (failure) {
    edges.warn(
      formatTeardownWarning(
        who,
        `teardown script failed on ${c.host}, tolerated as \`kubeadm reset --force || true\` ` +
          `(the machine is destroyed next): ${failure}`,
      ),
    );
  }
}
