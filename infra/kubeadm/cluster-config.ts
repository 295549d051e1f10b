// kubeadm-config's ClusterConfiguration at a new Kubernetes version: the version set, and
// the feature gates kubeadm has removed by then dropped. kubeadm refuses a configuration
// naming a gate it no longer knows ("unrecognized feature-gate key"), so a cluster made on
// 1.29-1.31 (where molt's init sets EtcdLearnerMode) would fail its first 1.33 join.
import * as semver from "semver";
import type { ClusterConfigRefs, ComponentRefs, HostPathMount } from "../../orchestrator/core/host-files";

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

/**
 * What a ClusterConfiguration (parsed YAML, kubeadm v1beta3 or v1beta4) says of the host
 * files of the API server, controller manager and scheduler: their extraArgs (a map in
 * v1beta3, a list of name/value in v1beta4; a flag given twice keeps its last value) and
 * extraVolumes.
 */
export function clusterConfigRefs(cc: unknown): ClusterConfigRefs {
  const root = isRecord(cc) ? cc : {};
  const component = (key: string): ComponentRefs => {
    const c = isRecord(root[key]) ? root[key] : {};
    const extraArgs: Record<string, string> = {};
    if (Array.isArray(c.extraArgs)) {
      for (const a of c.extraArgs)
        if (isRecord(a) && typeof a.name === "string") extraArgs[a.name] = String(a.value ?? "");
    } else if (isRecord(c.extraArgs)) {
      for (const [k, v] of Object.entries(c.extraArgs)) extraArgs[k] = String(v ?? "");
    }
    const extraVolumes: HostPathMount[] = [];
    for (const v of Array.isArray(c.extraVolumes) ? c.extraVolumes : []) {
      if (!isRecord(v) || typeof v.hostPath !== "string" || typeof v.mountPath !== "string") continue;
      extraVolumes.push({
        name: typeof v.name === "string" ? v.name : v.hostPath,
        hostPath: v.hostPath,
        mountPath: v.mountPath,
        ...(typeof v.readOnly === "boolean" ? { readOnly: v.readOnly } : {}),
        ...(typeof v.pathType === "string" ? { pathType: v.pathType } : {}),
      });
    }
    return { extraArgs, extraVolumes };
  };
  return {
    apiServer: component("apiServer"),
    controllerManager: component("controllerManager"),
    scheduler: component("scheduler"),
  };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
