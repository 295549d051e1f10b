// The replacements a rollout would do, for `plan` and the confirmation prompt.
import type { Intent, NodeEntry, World } from "../model";
import { certificateExpiring, isOutdated } from "./rules";
import { chainOf } from "./chain";

export interface PlannedReplacement {
  order: number;
  node: string;
  from: string;
  to: string;
  reason: string;
}

/** Oldest outdated first, with why each is replaced. */
export function plannedReplacements(
  nodes: NodeEntry[],
  intent: Intent,
  certificates?: World["certificates"],
): PlannedReplacement[] {
  const desc = (n: { image: string; kubernetesVersion?: string }) =>
    n.image + (n.kubernetesVersion ? `/k8s ${n.kubernetesVersion}` : "");
  const k8sChange = (n: NodeEntry) => (n.kubernetesVersion ?? undefined) !== (intent.kubernetesVersion ?? undefined);
  return [...nodes]
    .filter((n) => isOutdated(n, intent, certificates))
    .sort((a, b) => a.generation - b.generation)
    .map((n, i) => ({
      order: i + 1,
      node: n.name,
      from: desc(n),
      to: desc(intent),
      reason: n.adopted
        ? `adopted (etcd ${n.adopted.etcdVersion}): replaced by a molt node; ` +
          (n.adopted.machine
            ? `its machine (imported: ${n.adopted.machine.importId}) is destroyed`
            : "its machine is left to its owner")
        : k8sChange(n)
          ? `Kubernetes ${n.kubernetesVersion ?? "?"} → ` +
            `${intent.kubernetesVersion ?? "?"}${n.image !== intent.image ? ", new image" : ""}`
          : n.image !== intent.image
            ? "base image differs"
            : certificateReason(n.name, intent, certificates),
    }));
}

/** Why a node that is otherwise up to date is replaced: its first certificate to expire. */
function certificateReason(node: string, intent: Intent, certificates: World["certificates"]): string {
  const c = certificates?.[node];
  if (!c?.ok || !certificateExpiring(certificates, node)) return "outdated";
  return (
    `certificate ${c.path} expires ${c.notAfter.slice(0, 16).replace("T", " ")} UTC, within ` +
    `${intent.rollout.replaceCertificatesExpiringWithinDays} days (molt:rollout.replaceCertificatesExpiringWithinDays)`
  );
}

/**
 * The replacements that come first: in a chained upgrade (plan/chain.ts) the step that rolls
 * now (a reached step's own, when its nodes are not all on its image), else the intent's.
 */
export function replacementsNow(s: World): PlannedReplacement[] {
  const r = chainOf(s.nodes, s.intent);
  if (r.kind !== "chain") return plannedReplacements(s.nodes, s.intent, s.certificates);
  const settle = r.chain.settle && plannedReplacements(s.nodes, r.chain.settle.intent, s.certificates);
  return settle?.length ? settle : plannedReplacements(s.nodes, r.chain.intent, s.certificates);
}
