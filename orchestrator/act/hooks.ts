// The `hook` operation: an operator hook (molt:hooks command, then the library callback)
// for one node. It decides nothing: a failure is reported to the planner
// (plan/control-steps.ts hookFailure), which rolls a new node back or stops the run.
import type { Act, ActContext } from "./context";
import type { ActOutcome } from "../core/memory";
import {
  HookFiles,
  hookEnv,
  runHookCallback,
  runHookCommand,
  writeSshConfig,
  type HookContext,
  type HookRun,
} from "../controls/hooks";
import type { Operation } from "../core/model";

type HookOp = Extract<Operation, { kind: "hook" }>;

export const hook: Act<"hook"> = async (op, ctx) => {
  const spec = ctx.intent.hooks?.[op.hook];
  const callback = ctx.hookCallbacks?.[op.hook];
  const timeoutSeconds = spec?.timeoutSeconds ?? 300;
  const files = new HookFiles();
  try {
    let hc: Omit<HookContext, "signal">;
    try {
      hc = await hookContext(op, ctx, files);
    } catch (e) {
      return failed(op, ctx, `its credentials could not be prepared: ${(e as Error).message.split("\n")[0]}`);
    }
    const runs: ["command" | "callback", () => Promise<HookRun>][] = [];
    if (spec?.command) {
      const command = spec.command;
      runs.push([
        "command",
        () =>
          runHookCommand({
            command,
            timeoutSeconds,
            env: hookEnv(hc),
            signal: ctx.signal,
            onLine: (line) => ctx.report({ type: "hook-output", hook: op.hook, node: op.node, line }),
          }),
      ]);
    }
    if (callback) runs.push(["callback", () => runHookCallback(callback, hc, timeoutSeconds, ctx.signal)]);
    for (const [source, run] of runs) {
      const t = Date.now();
      const r = await ctx.timed("hook", "hook", op.node, run, (x) => x.ok);
      ctx.report({
        type: "hook",
        hook: op.hook,
        node: op.node,
        source,
        ok: r.ok,
        ms: Date.now() - t,
        output: r.output,
        ...(r.error ? { error: r.error } : {}),
      });
      if (!r.ok) return failed(op, ctx, failure(source, r, ctx.hookOutputInReports === true));
    }
    return { kind: "done" };
  } finally {
    files.remove();
  }
};

/**
 * Why a hook failed, for the planner's reasons (and from them the summary and webhooks): how
 * (an exit code, a timeout), and its last lines only when molt:notify.includeHookOutput allows.
 */
function failure(source: "command" | "callback", r: HookRun, withOutput: boolean): string {
  const how = `${source === "command" ? "its command" : "the library callback"} ${r.error ?? "failed"}`;
  const last = withOutput
    ? r.output
        .trim()
        .split("\n")
        .filter((l) => l.trim())
        .slice(-3)
        .join(" | ")
    : "";
  return last ? `${how}; last output: ${last}` : how;
}

function failed(op: HookOp, ctx: ActContext, why: string): ActOutcome {
  // A cancelled run stops at this boundary; the hook did not fail on its own.
  if (ctx.signal?.aborted) return { kind: "stop", result: "cancelled", reason: `cancelled during the ${op.hook} hook` };
  return { kind: "hook-failed", why };
}

/** The node, the stack's nodes, an ssh_config for them, and (Kubernetes) an admin kubeconfig. */
async function hookContext(op: HookOp, ctx: ActContext, files: HookFiles): Promise<Omit<HookContext, "signal">> {
  const state = await ctx.edges.stack.state();
  const e = state.endpoints.find((x) => x.name === op.node);
  const sshConfig = state.sshPrivateKey
    ? writeSshConfig(
        files,
        state.sshPrivateKey,
        state.endpoints.map((x) => ({
          name: x.name,
          host: x.sshHost,
          port: x.sshPort,
          user: x.sshUser ?? state.sshUser,
          hostPublicKey: x.hostPublicKey,
        })),
        ctx.edges.nodes.access,
      )
    : undefined;
  // kubeadm's admin.conf names the cluster's endpoint (controlPlaneEndpoint), not the node.
  const via = ctx.world.kube?.via;
  const kubeconfig =
    ctx.intent.kubernetesVersion !== undefined && via
      ? files.write("kubeconfig", await ctx.edges.nodes.run(via, "SUDO cat /etc/kubernetes/admin.conf", "admin.conf"))
      : undefined;
  return {
    hook: op.hook,
    stack: ctx.edges.stack.name,
    node: op.node,
    nodes: state.nodes.map((n) => n.name),
    ...(e
      ? { address: e.privateAddress, ssh: { host: e.sshHost, port: e.sshPort, user: e.sshUser ?? state.sshUser } }
      : {}),
    ...(sshConfig ? { sshConfig } : {}),
    ...(kubeconfig ? { kubeconfig } : {}),
  };
}
