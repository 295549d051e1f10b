// kubeadm-config's ClusterConfiguration at a new Kubernetes version: the version set, and
// the feature gates kubeadm has removed by then dropped. kubeadm refuses a configuration
// naming a gate it no longer knows ("unrecognized feature-gate key"), so a cluster made on
// 1.29-1.31 (where molt's init sets EtcdLearnerMode) would fail its first 1.33 join.
import * as semver from "semver";

/** Gates kubeadm removed, with the first minor that refuses them. */
export const REMOVED_FEATURE_GATES: readonly { gate: string; removedIn: string }[] = [
  { gate: "EtcdLearnerMode", removedIn: "1.33.0" },
];

/** The gates a kubeadm of `version` refuses. */
export function removedFeatureGates(version: string): string[] {
  const v = semver.coerce(version);
  if (!v) throw new Error(`${JSON.stringify(version)} is not a Kubernetes version`);
  return REMOVED_FEATURE_GATES.filter((g) => semver.gte(v, g.removedIn)).map((g) => g.gate);
}

/** The ClusterConfiguration (parsed YAML) with kubernetesVersion set and removed gates dropped. */
export function clusterConfigurationAt(cc: Record<string, unknown>, version: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...cc, kubernetesVersion: `v${version.replace(/^v/, "")}` };
  const gates = cc.featureGates;
  if (gates && typeof gates === "object") {
    const kept = Object.fromEntries(
      Object.entries(gates as Record<string, unknown>).filter(([g]) => !removedFeatureGates(version).includes(g)),
    );
    if (Object.keys(kept).length) out.featureGates = kept;
    else delete out.featureGates;
  }
  return out;
}
