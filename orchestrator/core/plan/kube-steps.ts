// The planner's Kubernetes steps: every node's control plane healthy, no Node without a
// machine, and after the last node kubeadm-config and the addons follow the version.
import type { Operation } from "../model";
import { failNewNode, isJoining } from "./new-node";
import { hasNodeNamePrefix, kubeProblem, STALE_LEASE_SECONDS } from "./rules";
import type { Scope } from "./scope";

/**
 * Kubernetes: every node's API server, controller-manager, scheduler and Node must be
 * healthy too (the victim's may already be going: it is cordoned and being retired), and no
 * control-plane Node of this stack's naming may be left without a machine.
 */
export function kubernetesHealth(c: Scope): Operation | undefined {
  const { s } = c;
  if (s.intent.kubernetesVersion === undefined) return undefined;
  if (!s.kube) {
    if (s.expired.includes("kube"))
      return {
        kind: "refuse",
        condition: "KubernetesAPIReachable",
        reason: `the Kubernetes API cannot be observed: ${s.kubeError ?? "unknown"}`,
      };
    return { kind: "wait", key: "kube", reason: `waiting for the Kubernetes API: ${s.kubeError ?? "unknown"}` };
  }
  const kube = s.kube;
  for (const n of c.byAge) {
    const problem = kubeProblem(s, n.name);
    if (!problem) continue;
    const k = kube.nodes.find((x) => x.name === n.name);
    if (n.name === c.victim?.name && k?.unschedulable) continue;
    const retired = kube.components[n.name]?.retiredManifests ?? [];
    if (retired.length > 0)
      return {
        kind: "restore-control-plane",
        node: n.name,
        manifests: retired,
        via: kube.via,
        uncordon: !!k?.unschedulable,
        reason:
          `${n.name} stays, but a retirement that did not finish stopped its control plane (${problem}; ` +
          `moved aside: ${retired.join(", ")}): put the manifests back${k?.unschedulable ? " and uncordon it" : ""}`,
      };
    if (isJoining(c, n.name)) {
      const key = `join:${n.name}` as const;
      if (s.expired.includes(key))
        return failNewNode(
          c,
          n.name,
          c.memberOf(n)?.id,
          `new node ${n.name}'s control plane did not become healthy within the join deadline (${problem})`,
        );
      return { kind: "wait", key, node: n.name, reason: `waiting for ${n.name}'s control plane (${problem})` };
    }
    const key = `health:${n.name}` as const;
    if (s.expired.includes(key))
      return {
        kind: "refuse",
        condition: "KubernetesControlPlaneHealthy",
        reason: `the control plane of ${n.name} is not healthy (${problem}); no node was changed`,
      };
    return { kind: "wait", key, node: n.name, reason: `control plane of ${n.name} is not healthy yet (${problem})` };
  }
  // Control-plane Nodes of this stack's naming that no stack node owns: machines molt
  // destroyed (a crash came between the destroy and the Node's deletion). Deleted once
  // their Lease shows no kubelet is left; a Node still renewing is a machine molt does
  // not know, and stops the rollout.
  for (const k of kube.nodes) {
    if (!k.controlPlane || !hasNodeNamePrefix(c.stack, k.name) || s.nodes.some((n) => n.name === k.name)) continue;
    if (k.leaseAgeSeconds === undefined || k.leaseAgeSeconds > STALE_LEASE_SECONDS)
      return {
        kind: "delete-node",
        node: k.name,
        via: kube.via,
        reason: `Node ${k.name} belongs to no node of the stack (its machine is gone)`,
      };
    const key = `stale-node:${k.name}` as const;
    if (s.expired.includes(key))
      return {
        kind: "refuse",
        condition: "KubernetesNodesMatchStack",
        reason:
          `control-plane Node ${k.name} is not in the stack but its kubelet still renews its Lease: a machine ` +
          `molt does not manage runs under this stack's node names`,
      };
    return {
      kind: "wait",
      key,
      node: k.name,
      reason: `Node ${k.name} is not in the stack; waiting for its Lease to expire`,
    };
  }
  return undefined;
}

/** After the last node: kubeadm-config, kube-proxy and CoreDNS follow the version. */
export function addons(c: Scope): Operation | undefined {
  const { s } = c;
  const target = s.intent.kubernetesVersion;
  if (target === undefined || !s.kube) return undefined;
  const cc = s.kube.clusterConfigVersion;
  if (cc !== undefined && cc !== target) {
    return {
      kind: "update-cluster-config",
      version: target,
      via: s.kube.via,
      reason: `every node runs ${target} but kubeadm-config says ${cc}`,
    };
  }
  const proxy = s.kube.kubeProxy;
  if (proxy && proxy.version !== target) {
    return {
      kind: "update-addons",
      version: target,
      via: s.kube.via,
      kubeadmNode: c.newest.name,
      reason:
        `every control-plane node runs ${target}: update kube-proxy (${proxy.version}) and CoreDNS to its ` +
        `versions`,
    };
  }
  if (proxy && !proxy.rolledOut) {
    if (s.expired.includes("addons"))
      return {
        kind: "refuse",
        condition: "AddonsRolledOut",
        reason:
          "the kube-proxy DaemonSet did not finish rolling out within molt:timeouts.drainSeconds; every " +
          "control-plane " +
          "node already runs the target version. Check its pods, then run molt again to wait for it",
      };
    return { kind: "wait", key: "addons", reason: "waiting for the kube-proxy DaemonSet to roll out" };
  }
  return undefined;
}
