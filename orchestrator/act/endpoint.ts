// The API endpoint and the retiring node (deregister-target below: the load balancer's turn).
// release-vip: the retiring node gives the API endpoint's VIP away before anything is taken
// from it (drain, API server stop, etcd member). Its keepalived stops (a priority-0 advert:
// a backup takes over within a fraction of advert_int; an adopted node's keepalived is its
// owner's, stopped the same way); then molt waits until the hand-off is complete
// (core/plan/vip.ts vipHandOff: one other holder, MASTER, the endpoint answering through
// the VIP). If it is not within the settle deadline, keepalived is started again on the
// node (the endpoint stays where it was) and the run stops.
import { pollUntil } from "../../lib/poll";
import { vipHandOff } from "../core/plan/vip";
import type { Act } from "./context";

export const releaseVip: Act<"release-vip"> = async (op, ctx) => {
  const address = ctx.intent.vip?.address;
  if (!address || !ctx.edges.nodes.vip) throw new Error("release-vip without molt:apiEndpoint mode vip");
  const vip = await ctx.edges.nodes.vip();
  const seconds = ctx.intent.timeouts.settleSeconds;
  const nodes = ctx.world.nodes.map((n) => n.name);
  const endpoint = ctx.intent.kubernetesVersion ? "apiserver" : "etcd";
  let last = "";
  const holder = await ctx.timed("endpoint", op.kind, op.node, async () => {
    await vip.keepalived(op.node, address, "release", seconds);
    return pollUntil(
      async () => {
        const v = await vip.observe(address, nodes);
        let h = vipHandOff(v, op.node);
        // Asked from the node that gave the VIP away: the request crosses the network.
        if (!h.done && h.ask) h = vipHandOff(v, op.node, await vip.answers(op.node, address, endpoint));
        if (h.done) return h.holder;
        last = h.why;
        return undefined;
      },
      {
        what: `another node to hold the VIP ${address}`,
        deadlineMs: seconds * 1000,
        intervalMs: 50,
        maxIntervalMs: 250,
        signal: ctx.signal,
      },
    ).catch(() => undefined);
  });
  if (holder) return { kind: "done" };
  const resumed = await vip.keepalived(op.node, address, "resume", seconds).then(
    () => `keepalived on ${op.node} was started again`,
    (e: Error) =>
      `starting keepalived on ${op.node} again FAILED (${e.message.split("\n")[0]}): no node may hold the VIP now; ` +
      `start it there by hand (molt left its configuration in place)`,
  );
  return {
    kind: "stop",
    result: "failed",
    reason:
      `the hand-off of the API endpoint VIP ${address} from ${op.node} did not complete within ${seconds}s ` +
      `(${last}); ` +
      `${resumed} and nothing was removed. Check keepalived on the other nodes ` +
      "(their endpoint check, VRRP multicast between them), then run molt again",
  };
};

/**
 * deregister-target: the retiring node leaves the API load balancer, and molt waits until the
 * load balancer reports it drained (unused: its deregistration delay over), within that delay
 * and the settle deadline. Its API server serves throughout; it is stopped only after. If the
 * load balancer does not let it go in time, the node is registered again and the run stops
 * with nothing removed. A node removed because it failed or is dead (`drain: false`) is only
 * deregistered.
 */
export const deregisterTarget: Act<"deregister-target"> = async (op, ctx) => {
  const lb = ctx.edges.lb;
  const observed = ctx.world.lb;
  const ep = ctx.world.endpoints.find((e) => e.name === op.node);
  if (!lb || !observed || !ep) throw new Error(`deregister-target ${op.node} without an observed API load balancer`);
  if (op.drain === false) {
    // A failed or dead node being removed: out of rotation, no drain to wait for (plan/removal.ts).
    await ctx.timed("endpoint", op.kind, op.node, () => lb.deregister(ep));
    return { kind: "done" };
  }
  const seconds = observed.drainSeconds + ctx.intent.timeouts.settleSeconds;
  let last = "";
  const drained = await ctx
    .timed("endpoint", op.kind, op.node, async () => {
      await lb.deregister(ep);
      return pollUntil(
        async (miss) => {
          const t = (await lb.observe([ep])).targets[op.node];
          last = !t ? "not observed" : "error" in t ? t.error : t.detail ? `${t.state} (${t.detail})` : t.state;
          return t && "state" in t && t.state === "unused" ? true : miss(last);
        },
        {
          what: `${observed.name} to drain ${op.node}`,
          deadlineMs: seconds * 1000,
          intervalMs: Math.min(ctx.pollMs, 1000),
          maxIntervalMs: Math.max(ctx.pollMs, 1000),
          signal: ctx.signal,
        },
      ).catch((e: Error) => {
        // The run's cancel; an SDK call's own timeout is an AbortError too, and is a miss.
        if (e.name === "AbortError" && ctx.signal?.aborted) throw e;
        return false as const;
      });
    })
    .catch((e: Error) => {
      // Cancelled: the loop stops at this boundary; a rerun deregisters again and waits on.
      if (e.name === "AbortError" && ctx.signal?.aborted) return "cancelled" as const;
      throw e;
    });
  if (drained) return { kind: "done" };
  const resumed = await lb.register(ep).then(
    () => `${op.node} was registered again`,
    (e: Error) =>
      `registering ${op.node} again FAILED (${e.message.split("\n")[0]}): it serves no new connections; ` +
      `register it by hand or run molt again`,
  );
  return {
    kind: "stop",
    result: "failed",
    reason:
      `${observed.name} did not drain ${op.node} within ${seconds}s (its deregistration delay and health check, ` +
      `plus molt:timeouts.settleSeconds; last seen: ${last}); ${resumed} and nothing was removed. Check the ` +
      "load balancer's deregistration delay, then run molt again",
  };
};

/** register-target: a node that stays was left out of the API load balancer; it goes back in. */
export const registerTarget: Act<"register-target"> = async (op, ctx) => {
  const ep = ctx.world.endpoints.find((e) => e.name === op.node);
  if (!ctx.edges.lb || !ep) throw new Error(`register-target ${op.node} without an API load balancer`);
  const lb = ctx.edges.lb;
  await ctx.timed("endpoint", op.kind, op.node, () => lb.register(ep));
  return { kind: "done" };
};
