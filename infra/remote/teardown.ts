// How a node's teardown (a RemoteCommand's delete: kubeadm reset, the lab's etcd reset)
// learns that molt does not want it, and how it reports what it skipped or what failed.
// A destroyed resource's delete only ever sees the props stored at its creation, so the
// knowledge travels in the engine's environment for that one `up`, which the engine passes
// on to the dynamic provider that runs the delete.
//
// The rule (infra/remote/command-impl.ts):
// - `destroyed`: a machine molt owns, retired and destroyed by this `up` (a prune): no
//   teardown at all, not even a connection. As Cluster API's KubeadmControlPlane, molt does
//   not reset a machine that is about to disappear; by then it serves nothing (drained, its
//   API server stopped and out of the load balancer, its etcd member removed), and its Node
//   is deleted only after the machine is gone (orchestrator/act/provision.ts).
// - `unreachable`: a node the planner saw without an etcd member and not answering over
//   SSH, destroyed by a rollback: one short connect; if it still does not answer, its
//   teardown is skipped and the machine is destroyed without it;
// - any other node gets the usual connect deadline (a failure there fails the `up`):
//   its teardown runs (a rollback of a node that answers, orphans of a failed `up`, a
//   destroy outside molt);
// - a teardown script that runs and fails is tolerated and reported (KubeOne's
//   `kubeadm reset --force || true`): the machine is destroyed next anyway.
// Both reports go to the delete's stderr, which the engine turns into diagnostics; the
// orchestrator turns those into `warning` events (parseTeardownWarning).

export const TEARDOWN_SKIPS_ENV = "MOLT_TEARDOWN_SKIPS";

/** A node whose teardown molt skips in this `up`, and when. */
export interface TeardownSkip {
  name: string;
  /** Where its teardown would connect: the connection's host and pinned host key. */
  host: string;
  hostKey: string;
  /** `destroyed`: always, without connecting; `unreachable`: only if it still does not answer. */
  when: "destroyed" | "unreachable";
}

export function encodeTeardownSkips(nodes: TeardownSkip[]): string {
  return JSON.stringify(nodes.map(({ name, host, hostKey, when }) => ({ name, host, hostKey: hostKey.trim(), when })));
}

/** The entry for this connection, if molt listed it for this `up`. */
export function teardownSkipFor(
  connection: { host: string; hostKey: string },
  env: NodeJS.ProcessEnv = process.env,
): TeardownSkip | undefined {
  const raw = env[TEARDOWN_SKIPS_ENV];
  if (!raw) return undefined;
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    // A garbled list names no node: every teardown runs as usual.
    return undefined;
  }
  if (!Array.isArray(list)) return undefined;
  return (list as Partial<TeardownSkip>[]).find(
    (n): n is TeardownSkip =>
      typeof n?.name === "string" &&
      (n.when === "destroyed" || n.when === "unreachable") &&
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
