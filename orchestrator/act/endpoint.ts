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
