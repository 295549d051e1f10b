// The planner's operator controls: hooks around a replacement (postJoin, preRetire,
// postRetire), the soak of a new node, and the stops at a replacement boundary
// (--max-replacements, a maintenance window that closed). Each is a step of decide.ts.
//
// Hooks are operations like any other: decided from the observed world and the run's
// memory of hooks that passed. That memory is lost with the process, so after a crash a
// rerun runs a hook again whenever the world still calls for it (at least once, never
// skipped): hooks must be idempotent, as Cluster API's lifecycle hooks must be.
import type { HookName, Operation } from "../model";
import { failNewNode, isJoining } from "./new-node";
import { isOutdated } from "./rules";
import type { Scope } from "./scope";

const wants = (c: Scope, hook: HookName): boolean => c.s.intent.hooks?.[hook] !== undefined;
const passed = (c: Scope, hook: HookName, node: string): boolean =>
  c.s.controls?.hooksPassed.includes(`${hook}:${node}`) ?? false;

/** A hook failed in this run: postJoin rolls the new node back (or pauses); the others stop the run. */
export function hookFailure(c: Scope): Operation | undefined {
  const f = c.s.controls?.hookFailed;
  if (!f) return undefined;
  const node = c.s.nodes.find((n) => n.name === f.node);
  if (f.hook === "postJoin")
    return node
      ? failNewNode(c, f.node, c.memberOf(node)?.id, `postJoin hook failed for new node ${f.node} (${f.why})`)
      : undefined;
  return {
    kind: "refuse",
    condition: f.hook === "preRetire" ? "PreRetireHook" : "PostRetireHook",
    reason:
      f.hook === "preRetire"
        ? `preRetire hook failed for ${f.node} (${f.why}); ${f.node} was not touched and nothing was removed. ` +
          `Fix what the hook reports, then run molt again`
        : `postRetire hook failed for ${f.node} (${f.why}); its etcd member is already removed: run molt again ` +
          `to rerun the hook and destroy it`,
  };
}

/**
 * postRetire: a node that left etcd to be retired (this run removed its member, or it is
 * outdated and memberless), before its machine is destroyed. Seen in the world, so a rerun
 * after a crash runs it again rather than never.
 */
export function postRetireHook(c: Scope): Operation | undefined {
  if (!wants(c, "postRetire")) return undefined;
  const gone = c.byAge.find((n) => !c.memberOf(n));
  if (!gone || passed(c, "postRetire", gone.name) || c.s.nodes.length === 1) return undefined;
  const retired =
    c.s.controls?.retired.includes(gone.name) || isOutdated(gone, c.s.intent, c.s.certificates) || !!gone.adopted;
  if (!retired) return undefined;
  return {
    kind: "hook",
    hook: "postRetire",
    node: gone.name,
    reason: `${gone.name} has left etcd: run the postRetire hook before its machine is destroyed`,
  };
}

/**
 * The new node under watch: the one this run added and sees healthy, or (after a run
 * that ended mid-surge) the newest up-to-date node of a surge still in progress. Only
 * asked once every node is healthy (the steps before it passed).
 */
function watched(c: Scope): string | undefined {
  // The node still `joining` in memory is healthy by now (the health steps came first); the
  // loop marks it as watched only after this pass.
  const w = c.s.joining ?? c.s.controls?.watching;
  if (w && c.s.nodes.some((n) => n.name === w) && w !== c.victim?.name) return w;
  if (c.s.nodes.length > c.s.intent.replicas && isJoining(c, c.newest.name)) return c.newest.name;
  // Retire first (maxSurge 0): a node that joined just before a crash leaves the count at
  // replicas, which looks like a finished replacement. Until this run retires a node, its newest
  // up-to-date node is watched again (its postJoin and soak: at least once, never skipped).
  const { s } = c;
  if (
    s.intent.rollout.maxSurge === 0 &&
    c.outdated.length > 0 &&
    (s.controls?.retired.length ?? 0) === 0 &&
    !isOutdated(c.newest, s.intent, s.certificates)
  )
    return c.newest.name;
  return undefined;
}

/** postJoin: a new node is a healthy voter (with a ready control plane): check it before anything retires. */
export function postJoinHook(c: Scope): Operation | undefined {
  if (!wants(c, "postJoin")) return undefined;
  const node = watched(c);
  if (!node || passed(c, "postJoin", node)) return undefined;
  return {
    kind: "hook",
    hook: "postJoin",
    node,
    reason: `new node ${node} is healthy: run the postJoin hook before any old node retires`,
  };
}

/**
 * Soak: a healthy new node is observed for molt:rollout.soakSeconds before the next
 * retirement. It waits on `soak:<node>`; the key's expiry means the soak passed. A node that
 * turns unhealthy meanwhile is still the new node (plan/new-node.ts isJoining) and is rolled
 * back like one that never became healthy.
 */
export function soak(c: Scope): Operation | undefined {
  const seconds = c.s.intent.timeouts.soakSeconds ?? 0;
  if (seconds <= 0 || !c.victim) return undefined;
  const node = watched(c);
  if (!node) return undefined;
  const key = `soak:${node}` as const;
  if (c.s.expired.includes(key)) return undefined;
  return {
    kind: "wait",
    key,
    node,
    reason: `soaking new node ${node}: healthy, observed for ${seconds}s before ${c.victim.name} is retired`,
  };
}

/**
 * A replacement boundary: every node is healthy, the node count is back at replicas and
 * some node is outdated, so the next change would start a new replacement (a surge with
 * maxSurge 1, a retirement with maxSurge 0). The run stops here, paused, when the
 * maintenance window closed or --max-replacements were done; the next run continues.
 */
export function replacementBoundary(c: Scope): Operation | undefined {
  const { s } = c;
  if (c.outdated.length === 0 || s.nodes.length !== s.intent.replicas) return undefined;
  const done = s.controls?.retired.length ?? 0;
  const left = `${c.outdated.length} outdated node(s) left (${c.outdated.map((n) => n.name).join(", ")})`;
  if (s.controls?.windowClosed)
    return {
      kind: "pause",
      reason:
        `${s.controls.windowClosed}: stopped between replacements after ${done} replacement(s); ${left}; ` +
        `run molt again inside the window to continue`,
    };
  const max = s.intent.rollout.maxReplacements;
  if (max !== undefined && done >= max)
    return {
      kind: "pause",
      reason: `replaced ${done} node(s) (--max-replacements ${max}); ${left}; run molt again to continue`,
    };
  return undefined;
}

/** preRetire: before the node to retire is touched (VIP released, drained, member removed). */
export function preRetireHook(c: Scope): Operation | undefined {
  const victim = c.victim;
  if (!wants(c, "preRetire") || !victim || passed(c, "preRetire", victim.name)) return undefined;
  return {
    kind: "hook",
    hook: "preRetire",
    node: victim.name,
    reason: `${victim.name} is to be retired: run the preRetire hook before it is touched`,
  };
}
