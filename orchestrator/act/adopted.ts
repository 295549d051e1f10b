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
import { STATIC_POD_MANIFESTS, staticPodRefs } from "../../infra/kubeadm/cluster-config";
import { shellQuote } from "../../infra/remote/ssh";
import { adoptedWipe, hostFilesOf, type ClusterConfigRefs } from "../core/host-files";

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

type Component = keyof ClusterConfigRefs;

/** Prints each component's static pod manifest after a `### <component>` line (the API server's stopped one too). */
export const READ_MANIFESTS = (Object.entries(STATIC_POD_MANIFESTS) as [Component, string][])
  .map(
    ([c, file]) =>
      `for f in /etc/kubernetes/manifests/${file} /etc/kubernetes/${file}.retired; do ` +
      `if SUDO test -f "$f"; then echo '### ${c}'; SUDO cat "$f"; echo; break; fi; done`,
  )
  .join("\n");

/** The output of READ_MANIFESTS, by component. */
export function manifestsIn(out: string): Partial<Record<Component, string>> {
  const found: Partial<Record<Component, string>> = {};
  const parts = out.split(/^### (apiServer|controllerManager|scheduler)$/m);
  for (let i = 1; i + 1 < parts.length; i += 2) found[parts[i] as Component] = parts[i + 1];
  return found;
}

/**
 * Without Kubernetes observed, the host files the node's own manifests name (the rule that
 * picks what a new node gets from kubeadm-config); undefined when none was left on it.
 */
async function hostFilesFromManifests(op: { node: string }, ctx: Parameters<Act<"retire-adopted">>[1]) {
  const out = await ctx.edges.nodes.run(
    op.node,
    `sh -c ${shellQuote(READ_MANIFESTS)}`,
    `reading ${op.node}'s static pod manifests`,
  );
  const manifests = manifestsIn(out);
  if (Object.keys(manifests).length === 0) return undefined;
  return hostFilesOf(staticPodRefs(manifests))
    .filter((f) => f.action === "copy")
    .map((f) => f.path);
}

export const retireAdopted: Act<"retire-adopted"> = async (op, ctx) => {
  const entry = ctx.world.nodes.find((n) => n.name === op.node);
  if (!entry?.adopted) throw new Error(`internal: ${op.node} is not an adopted node of the stack`);
  const a = entry.adopted;
  const done: string[] = [];
  if (op.unreachable && ctx.edges.nodes.unreachable.has(op.node)) {
    const unknown = op.hostFilesUnknown ? " and the cluster's host files (unknown: Kubernetes unobserved)" : "";
    done.push(
      `not reset: unreachable over SSH; it still holds the cluster's keys (${op.wipe.join(", ")})${unknown}: ` +
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
    // Kubernetes unobserved: the plan's list lacks the host files; the node's manifests name them
    // (read before the reset, which removes them).
    const read = op.hostFilesUnknown ? await hostFilesFromManifests(op, ctx) : undefined;
    // The machine stays with its owner: of what its manifests name, only paths under
    // /etc/kubernetes/ are removed; a hostPath elsewhere (/usr/local, /opt/...) may be the owner's.
    const fromManifests = read && adoptedWipe(read);
    const outside = [...new Set([...(op.outside ?? []), ...(fromManifests?.outside ?? [])])];
    const wipe = [...new Set([...op.wipe, ...(fromManifests?.wipe ?? [])])];
    // A bounded poll inside the script: the member stops within the settle deadline.
    const script = RESET.replace(/DEADLINE/g, String(ctx.intent.timeouts.settleSeconds)).replace(
      /WIPE/g,
      wipe.map(shellQuote).join(" "),
    );
    const out = await ctx.timed("provision", op.kind, op.node, () =>
      ctx.edges.nodes.run(op.node, `sh -c ${shellQuote(script)}`, `resetting ${op.node}`),
    );
    done.push(out.includes("kubeadm-reset") ? "kubeadm reset" : "etcd data wiped");
    if (!out.includes("wiped-secrets")) throw new Error(`internal: the reset of ${op.node} did not wipe its secrets`);
    // Says what went, and what molt could not know: never "the secrets" when it wiped only some.
    done.push(`removed from the machine: ${wipe.join(", ")}`);
    if (outside.length)
      done.push(`left on the machine (named by the cluster, outside /etc/kubernetes/): ${outside.join(", ")}`);
    if (op.hostFilesUnknown)
      done.push(
        fromManifests
          ? "the cluster's host files read from the machine's own static pod manifests (Kubernetes unobserved)"
          : "the cluster's host files unknown (Kubernetes unobserved, no static pod manifest left on the machine): " +
              "files the cluster's API server read from the host (an encryption key, webhook credentials) may " +
              "remain; check the machine",
      );
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
