// How a node's teardown (a RemoteCommand's delete: kubeadm reset, the lab's etcd reset)
// learns that molt knows the node is dead, and how it reports what it skipped or what
// failed. A destroyed resource's delete only ever sees the props stored at its creation,
// so the knowledge travels in the engine's environment for that one `up`, which the
// engine passes on to the dynamic provider that runs the delete.
//
// The rule (infra/remote/command-impl.ts):
// - a node listed here (the planner saw it without an etcd member and not answering over
//   SSH) gets one short connect; if it still does not answer, its teardown is skipped
//   and the machine is destroyed without it;
// - any other node gets the usual connect deadline (a failure there fails the `up`:
//   molt never skips the teardown of a node it has not seen dead);
// - a teardown script that runs and fails is tolerated and reported (KubeOne's
//   `kubeadm reset --force || true`): the machine is destroyed next anyway.
// Both reports go to the delete's stderr, which the engine turns into diagnostics; the
// orchestrator turns those into `warning` events (parseTeardownWarning).

export const UNREACHABLE_NODES_ENV = "MOLT_UNREACHABLE_NODES";

/** A node molt saw without an etcd member and not answering over SSH. */
export interface UnreachableNode {
  name: string;
  /** Where its teardown would connect: the connection's host and pinned host key. */
  host: string;
  hostKey: string;
}

export function encodeUnreachableNodes(nodes: UnreachableNode[]): string {
  return JSON.stringify(nodes.map(({ name, host, hostKey }) => ({ name, host, hostKey: hostKey.trim() })));
}

/** The entry for this connection, if molt listed it as unreachable for this `up`. */
export function unreachableNodeFor(
  connection: { host: string; hostKey: string },
  env: NodeJS.ProcessEnv = process.env,
): UnreachableNode | undefined {
  const raw = env[UNREACHABLE_NODES_ENV];
  if (!raw) return undefined;
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    // A garbled list names no node: every teardown runs as usual.
    return undefined;
  }
  if (!Array.isArray(list)) return undefined;
  return (list as Partial<UnreachableNode>[]).find(
    (n): n is UnreachableNode =>
      typeof n?.name === "string" &&
      n.host === connection.host &&
      typeof n.hostKey === "string" &&
      n.hostKey === connection.hostKey.trim(),
  );
}

const WARNING_PREFIX = "[molt warning] ";

/** One line for the delete's stderr (the engine reports it as a diagnostic). */
export function formatTeardownWarning(node: string, message: string): string {
  return `${WARNING_PREFIX}${JSON.stringify({ node, message })}\n`;
}

/** The warning in an engine diagnostic line, if it is one. */
export function parseTeardownWarning(line: string): { node: string; message: string } | undefined {
  const at = line.indexOf(WARNING_PREFIX);
  if (at < 0) return undefined;
  try {
    const w = JSON.parse(line.slice(at + WARNING_PREFIX.length).trim()) as { node?: unknown; message?: unknown };
    return typeof w.node === "string" && typeof w.message === "string"
      ? { node: w.node, message: w.message }
      : undefined;
  } catch {
    return undefined;
  }
}
