// Runtime of RemoteCommand (loaded by the dynamic provider through MOLT_DIST).
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { connectDuringFirstBoot, connectRotating } from "./host-key-rotation";
import { RemoteCommandError, SshSession, envPrefix, shellQuote, type SshTarget } from "./ssh";
import type { RemoteCommandInputs, RemoteCommandOutputs } from "./command";

/** How long a node's sshd may take to accept the first connection. */
const CONNECT_DEADLINE_MS = 120_000;

const connect = (t: SshTarget) => SshSession.connect(t, { readyTimeoutMs: 20_000 });

async function runScript(
  ssh: SshSession,
  inputs: RemoteCommandInputs,
  script: string,
  what: string,
  stdin?: string,
): Promise<{ stdout: string; stderr: string }> {
  try {
    const env = envPrefix(inputs.environment ?? {});
    // --norc: Debian's bash sources /etc/bash.bashrc for commands sshd starts (SSH_SOURCE_BASHRC),
    // whose `[ -z "$PS1" ]` fails under -u before the script's first line.
    const cmd = `${env}exec bash --norc --noprofile -euo pipefail -c ${shellQuote(script)}`;
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

export async function remove(props: RemoteCommandInputs): Promise<void> {
  if (!props.delete) return;
  const session = await connectDuringFirstBoot(props.connection, CONNECT_DEADLINE_MS, connect, {
    retryHostKeyMismatch: false,
  });
  await runScript(session, props, props.delete, "delete script");
}
