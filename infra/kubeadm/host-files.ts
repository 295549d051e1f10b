// Carries the cluster's host files (orchestrator/core/host-files.ts: what kubeadm-config's
// ClusterConfiguration references, KubeOne's encryption key among them) from a healthy
// control-plane node to a new one before it joins, over SSH with pinned host keys. The
// contents pass through molt's memory only: never a file on molt's machine, never the state
// (the resource keeps the paths and a digest). Owners, modes and times are kept (tar
// --numeric-owner -p); the copy is checked file by file (sha256) on both ends.
import { createHash } from "node:crypto";
import type { HostFile } from "../../orchestrator/core/host-files";
import { connectDuringFirstBoot } from "../remote/host-key-rotation";
import { SshSession, shellQuote, type SshTarget } from "../remote/ssh";

/** More than this is not a set of configuration files: refused rather than copied. */
export const HOST_FILES_LIMIT_BYTES = 16 * 1024 * 1024;

export interface HostFilesInputs {
  /** The node they are copied from (a healthy voter holding them all). */
  from: SshTarget;
  /** The new node, before `kubeadm join`. */
  to: SshTarget;
  node: string;
  files: HostFile[];
}

export interface HostFilesOutputs {
  /** Regular files now on the new node, by path. */
  copied: string[];
  /** sha256 over `sha256sum` of those files, the same on both nodes. */
  digest: string;
  /** Directories made for the components to write into (audit logs). */
  created: string[];
}

function sudo(user: string): string {
  return user === "root" ? "" : "sudo -n ";
}

function rel(path: string): string {
  return path.replace(/^\/+/, "");
}

/** On the source: refuse what is missing or too big, then the tar of the files, base64, on stdout. */
export function renderPackScript(files: HostFile[]): string {
  const copy = files.filter((f) => f.action === "copy").map((f) => f.path);
  return [
    "set -euo pipefail",
    `paths=(${copy.map(shellQuote).join(" ")})`,
    "missing=()",
    'for p in "${paths[@]}"; do [ -e "$p" ] || missing+=("$p"); done',
    'if [ ${#missing[@]} -gt 0 ]; then echo "$(hostname) lacks ${missing[*]}" >&2; exit 3; fi',
    'size=$(du -sbc "${paths[@]}" | tail -n 1 | cut -f1)',
    `if [ "$size" -gt ${HOST_FILES_LIMIT_BYTES} ]; then`,
    `  echo "the host files on $(hostname) take $size bytes, more than ${HOST_FILES_LIMIT_BYTES}" >&2`,
    "  exit 4",
    "fi",
    `tar -C / --numeric-owner -h -czf - ${copy.map((p) => shellQuote(rel(p))).join(" ")} | base64 -w0`,
  ].join("\n");
}

/** `sha256sum` of every regular file under the paths, sorted: the same text on both ends after a copy. */
export function renderDigestScript(files: HostFile[]): string {
  const copy = files.filter((f) => f.action === "copy").map((f) => f.path);
  const paths = copy.map(shellQuote).join(" ");
  return `set -euo pipefail\nfind -L ${paths} -type f -print0 | sort -z | xargs -0 -r sha256sum`;
}

/** On the new node: the tar from stdin, then the directories the components write into. */
export function renderUnpackScript(files: HostFile[]): string {
  const create = files.filter((f) => f.action === "create").map((f) => f.path);
  const copies = files.some((f) => f.action === "copy");
  return [
    "set -euo pipefail",
    copies ? "base64 -d | tar -C / --numeric-owner -xzpf -" : "cat >/dev/null",
    ...(create.length ? [`mkdir -p ${create.map(shellQuote).join(" ")}`] : []),
  ].join("\n");
}

function asRoot(user: string, script: string): string {
  return `${sudo(user)}bash --norc --noprofile -c ${shellQuote(script)}`;
}

/** The part of an SSH session the copy uses (SshSession fits). */
export type HostFilesSession = Pick<SshSession, "run" | "close">;

export interface HostFilesEdges {
  /** One connection attempt (the new node's is retried while it boots). */
  connect(target: SshTarget): Promise<HostFilesSession>;
  /** How long the new node may take to accept its first connection. */
  firstBootDeadlineMs: number;
}

/** The same first-connection deadline and attempt as the node's other remote steps (remote/command-impl.ts). */
const realEdges: HostFilesEdges = {
  connect: (t) => SshSession.connect(t, { readyTimeoutMs: 20_000 }),
  firstBootDeadlineMs: 120_000,
};

/**
 * Runtime of ClusterHostFiles (loaded by its dynamic provider through MOLT_DIST). It is the
 * first step on the new machine, which may still be booting: its connection is retried
 * (refused, or another host key for a moment) until the first-boot deadline, as the other
 * remote steps' first connection is. The healthy source gets one attempt.
 */
export async function carryHostFiles(
  inputs: HostFilesInputs,
  edges: HostFilesEdges = realEdges,
): Promise<HostFilesOutputs> {
  const { files, node } = inputs;
  const copy = files.some((f) => f.action === "copy");
  const from = copy ? await edges.connect(inputs.from) : undefined;
  try {
    const to = await connectDuringFirstBoot(inputs.to, edges.firstBootDeadlineMs, edges.connect);
    try {
      let sums = "";
      let tar = "";
      if (from) {
        tar = await from.run(asRoot(inputs.from.user, renderPackScript(files)), `reading the host files for ${node}`);
        sums = await from.run(asRoot(inputs.from.user, renderDigestScript(files)), "digesting the host files");
      }
      await to.run(asRoot(inputs.to.user, renderUnpackScript(files)), `writing the host files on ${node}`, {
        stdin: tar,
      });
      if (from) {
        const there = await to.run(asRoot(inputs.to.user, renderDigestScript(files)), "checking the copied files");
        if (there !== sums)
          throw new Error(
            `the host files written on ${node} differ from ${inputs.from.host}'s after the copy ` +
              "(a file changed during it?); the join was not started",
          );
      }
      const copied = sums
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => l.replace(/^[0-9a-f]{64} {2}/, ""));
      return {
        copied,
        digest: createHash("sha256").update(sums).digest("hex"),
        created: files.filter((f) => f.action === "create").map((f) => f.path),
      };
    } finally {
      to.close();
    }
  } finally {
    from?.close();
  }
}
