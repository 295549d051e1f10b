// Retiring an adopted node (`molt adopt`), once it is drained, its API server stopped and
// its etcd member removed by the ordinary operations: what `prune` does to molt's own nodes,
// except that the machine is not molt's and stays running. It is reset over SSH (`kubeadm
// reset`; an etcd-only node's data wiped once its removed member stopped), released from the
// provider's attachments (the lab's HAProxy), its Node deleted, and its entry dropped with a
// targeted `up` (its AdoptedNode record goes, and on AWS and Azure its `<node>-api`
// registration in the load balancer: deregistered). A machine taken into the stack with `molt
// adopt --import` goes with that update, like one of molt's own. Every step is idempotent: a crash
// anywhere repeats them on the next run, the entry still listed.
import type { Act } from "./context";
import { shellQuote } from "../../infra/remote/ssh";

const RESET = [
  // Its member is gone already (removed with quorum checked): kubeadm must not look for it.
  "if command -v kubeadm >/dev/null 2>&1; then",
  "  SUDO kubeadm reset -f --skip-phases remove-etcd-member --cleanup-tmp-dir >&2",
  "  echo kubeadm-reset",
  "else",
  // etcd alone: a removed member stops itself; then its data goes, so it can never rejoin.
  "  for i in $(seq 1 DEADLINE); do",
  "    [ -z \"$(SUDO ss -ltnH 'sport = :2379')\" ] && break",
  "    [ \"$i\" = DEADLINE ] && { echo 'the removed etcd member still serves on 2379' >&2; exit 1; }",
  "    sleep 1",
  "  done",
  "  SUDO rm -rf /var/lib/etcd/member",
  "  echo etcd-wiped",
  "fi",
  // The machine stays with its owner: the cluster's CA keys and host files (an encryption key)
  // do not. Checked after: a path still there fails the retirement (it is retried).
  "SUDO rm -rf -- WIPE",
  'for p in WIPE; do if SUDO test -e "$p"; then echo "$p is still on the machine" >&2; exit 1; fi; done',
  "echo wiped-secrets",
].join("\n");

export const retireAdopted: Act<"retire-adopted"> = async (op, ctx) => {
  const entry = ctx.world.nodes.find((n) => n.name === op.node);
  if (!entry?.adopted) throw new Error(`internal: ${op.node} is not an adopted node of the stack`);
  const a = entry.adopted;
  const done: string[] = [];
  if (op.unreachable && ctx.edges.nodes.unreachable.has(op.node)) {
    done.push(
      `not reset: unreachable over SSH; it still holds the cluster's keys (${op.wipe.join(", ")}): ` +
        "wipe or destroy the machine before it runs again",
    );
  } else {
    // Its keepalived (the owner's VRRP group, which molt's nodes joined) stops and is disabled
    // first, so the VIP can never come back to a machine that serves nothing; a holder gave
    // the VIP away already (release-vip), any other was a backup.
    const address = ctx.intent.vip?.address;
    if (a.keepalived && address && ctx.edges.nodes.vip) {
      const vip = await ctx.edges.nodes.vip();
      const seconds = ctx.intent.timeouts.settleSeconds;
      await ctx.timed("endpoint", op.kind, op.node, () => vip.keepalived(op.node, address, "release", seconds));
      done.push("keepalived stopped and disabled");
    }
    // A bounded poll inside the script: the member stops within the settle deadline.
    const script = RESET.replace(/DEADLINE/g, String(ctx.intent.timeouts.settleSeconds)).replace(
      /WIPE/g,
      op.wipe.map(shellQuote).join(" "),
    );
    const out = await ctx.timed("provision", op.kind, op.node, () =>
      ctx.edges.nodes.run(op.node, `sh -c ${shellQuote(script)}`, `resetting ${op.node}`),
    );
    done.push(out.includes("kubeadm-reset") ? "kubeadm reset" : "etcd data wiped");
    if (!out.includes("wiped-secrets")) throw new Error(`internal: the reset of ${op.node} did not wipe its secrets`);
    done.push(`cluster secrets removed (${op.wipe.join(", ")})`);
  }
  done.push(...(await ctx.edges.stack.releaseAdopted(entry)));
  if (op.deleteNodeVia) {
    const kube = await ctx.edges.nodes.kube();
    const via = op.deleteNodeVia;
    await ctx.timed("kube", "delete-node", op.node, () => kube.deleteNode(via, op.node));
    done.push("Node deleted");
  }
  const prev = ctx.world.nodes;
  await ctx.timed("provision", op.kind, op.node, () =>
    ctx.edges.stack.apply({ op, prev, next: prev.filter((n) => n.name !== op.node), node: op.node }),
  );
  if (a.machine) {
    // Taken into the stack by `molt adopt --import`: the update that dropped the entry destroyed it.
    done.push("machine destroyed");
    ctx.report({ type: "adopted-destroyed", node: op.node, address: a.address, machine: a.machine.importId, done });
    return { kind: "done" };
  }
  ctx.report({
    type: "left-for-owner",
    node: op.node,
    address: a.address,
    ssh: `${a.ssh.user}@${a.ssh.host}:${a.ssh.port}${a.bastion ? ` via ${a.bastion}` : ""}`,
    ...(a.providerId ? { providerId: a.providerId } : {}),
    done,
  });
  return { kind: "done" };
};
