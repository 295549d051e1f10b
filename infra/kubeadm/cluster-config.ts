// kubeadm-config's ClusterConfiguration at a new Kubernetes version: the version set, and
// the feature gates kubeadm has removed by then dropped. kubeadm refuses a configuration
// naming a gate it no longer knows ("unrecognized feature-gate key"), so a cluster made on
// 1.29-1.31 (where molt's init sets EtcdLearnerMode) would fail its first 1.33 join.
import { isDeepStrictEqual } from "node:util";
import * as semver from "semver";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
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

/** The first Kubernetes minor whose kubeadm deploys etcd 3.7, which removed etcd's experimental-* flags. */
const ETCD_3_7_FROM = "1.37.0";

/** etcd's experimental flags 3.7 refuses: renamed, or turned into a feature gate (etcd 3.6's deprecations). */
export const ETCD_EXPERIMENTAL_FLAGS: Record<string, { flag: string } | { gate: string }> = {
  "experimental-compact-hash-check-enabled": { gate: "CompactHashCheck" },
  "experimental-compact-hash-check-time": { flag: "compact-hash-check-time" },
  "experimental-corrupt-check-time": { flag: "corrupt-check-time" },
  "experimental-initial-corrupt-check": { gate: "InitialCorruptCheck" },
  "experimental-enable-lease-checkpoint": { gate: "LeaseCheckpoint" },
  "experimental-enable-lease-checkpoint-persist": { gate: "LeaseCheckpointPersist" },
  "experimental-watch-progress-notify-interval": { flag: "watch-progress-notify-interval" },
  "experimental-warning-apply-duration": { flag: "warning-apply-duration" },
  "experimental-snapshot-catchup-entries": { flag: "snapshot-catchup-entries" },
  "experimental-compaction-batch-limit": { flag: "compaction-batch-limit" },
  "experimental-compaction-sleep-interval": { flag: "compaction-sleep-interval" },
  "experimental-bootstrap-defrag-threshold-megabytes": { flag: "bootstrap-defrag-threshold-megabytes" },
  "experimental-max-learners": { flag: "max-learners" },
  "experimental-memory-mlock": { flag: "memory-mlock" },
  "experimental-stop-grpc-service-on-defrag": { gate: "StopGRPCServiceOnDefrag" },
  "experimental-txn-mode-write-with-shared-buffer": { gate: "TxnModeWriteWithSharedBuffer" },
};

/**
 * etcd.local.extraArgs for an etcd that no longer knows experimental-* flags (KubeOne sets
 * experimental-compact-hash-check-enabled and experimental-corrupt-check-time): renamed, or
 * merged into feature-gates. A new node's etcd would exit on them ("flag provided but not
 * defined") and its join leave an unstarted learner. v1beta3 maps, v1beta4 lists.
 */
export function etcdArgsFor37(extraArgs: unknown): unknown {
  const pairs: [string, string][] = Array.isArray(extraArgs)
    ? extraArgs.flatMap((a) => (isRecord(a) && typeof a.name === "string" ? [[a.name, String(a.value ?? "")]] : []))
    : isRecord(extraArgs)
      ? Object.entries(extraArgs).map(([k, v]) => [k, String(v ?? "")])
      : [];
  if (!pairs.some(([k]) => k in ETCD_EXPERIMENTAL_FLAGS)) return extraArgs;
  const gates: string[] = [];
  const kept: [string, string][] = [];
  for (const [k, v] of pairs) {
    const to = ETCD_EXPERIMENTAL_FLAGS[k];
    if (!to) {
      if (k === "feature-gates") gates.push(...v.split(",").filter(Boolean));
      else kept.push([k, v]);
    } else if ("gate" in to) gates.push(`${to.gate}=${v === "" ? "true" : v}`);
    else if (!pairs.some(([n]) => n === to.flag)) kept.push([to.flag, v]);
  }
  if (gates.length) kept.push(["feature-gates", [...new Set(gates)].join(",")]);
  return Array.isArray(extraArgs) ? kept.map(([name, value]) => ({ name, value })) : Object.fromEntries(kept);
}

/** The ClusterConfiguration (parsed YAML) with kubernetesVersion set and removed gates dropped. */
export function clusterConfigurationAt(cc: Record<string, unknown>, version: string): Record<string, unknown> {
  const out: Record<string, unknown> = { ...cc, kubernetesVersion: `v${version.replace(/^v/, "")}` };
  const etcd = isRecord(cc.etcd) && isRecord(cc.etcd.local) ? cc.etcd.local : undefined;
  const v = semver.coerce(version);
  if (etcd && etcd.extraArgs !== undefined && v && semver.gte(v, ETCD_3_7_FROM))
    out.etcd = {
      ...(cc.etcd as Record<string, unknown>),
      local: { ...etcd, extraArgs: etcdArgsFor37(etcd.extraArgs) },
    };
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

/** What raising kubeadm-config to a version does to its ClusterConfiguration text. */
export type ClusterConfigRaise =
  { change: false; why: string } | { change: true; text: string; from: string; message: string };

/**
 * kubeadm-config's ClusterConfiguration (its YAML text) raised to `version` by
 * clusterConfigurationAt, the one rule of both ways molt raises it (the lab's
 * update-cluster-config and the clouds' join material): the version set, removed gates
 * dropped, etcd's experimental flags rewritten. Never lowered: a newer version is left as it
 * is. `change: false` when the text already says what the rule would write.
 */
export function raiseClusterConfiguration(text: string, version: string): ClusterConfigRaise {
  const target = semver.parse(version.replace(/^v/, ""));
  if (!target) throw new Error(`${JSON.stringify(version)} is not a Kubernetes release version`);
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (e) {
    throw new Error(`kubeadm-config's ClusterConfiguration is not YAML (${(e as Error).message.split("\n")[0]})`);
  }
  if (!isRecord(parsed)) throw new Error("kubeadm-config has no ClusterConfiguration (not a YAML mapping)");
  const current = typeof parsed.kubernetesVersion === "string" ? parsed.kubernetesVersion : "";
  const have = semver.coerce(current);
  if (have && semver.gt(have, target))
    return {
      change: false,
      why:
        `kubeadm-config names ${current}, newer than v${target.version}: leaving it ` +
        "(molt never lowers the cluster version)",
    };
  const raised = clusterConfigurationAt(parsed, target.version);
  if (isDeepStrictEqual(raised, parsed)) return { change: false, why: `kubeadm-config already names ${current}` };
  const notes = [
    ...removedFeatureGates(target.version)
      .filter((g) => isRecord(parsed.featureGates) && g in parsed.featureGates)
      .map((g) => `without the feature gate ${g} (removed by then)`),
    ...(isDeepStrictEqual(raised.etcd, parsed.etcd) ? [] : ["etcd's experimental flags renamed for etcd 3.7"]),
  ];
  return {
    change: true,
    text: stringifyYaml(raised),
    from: current,
    message:
      `raising kubeadm-config kubernetesVersion from ${current || "(none)"} to v${target.version}` +
      (notes.length ? `, ${notes.join(", ")}` : ""),
  };
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

/** kubeadm's static pod manifest of each component, by the ClusterConfiguration key it renders from. */
export const STATIC_POD_MANIFESTS: Record<keyof ClusterConfigRefs, string> = {
  apiServer: "kube-apiserver.yaml",
  controllerManager: "kube-controller-manager.yaml",
  scheduler: "kube-scheduler.yaml",
};

/**
 * The same refs read from the components' static pod manifests (kubeadm renders its extraArgs
 * into the container's command and its extraVolumes into hostPath volumes and mounts): what a
 * node says of its host files when kubeadm-config cannot be read. kubeadm's own flags and
 * mounts are among them; hostFilesOf leaves those out. A manifest that is not a Pod gives none.
 */
export function staticPodRefs(manifests: Partial<Record<keyof ClusterConfigRefs, string>>): ClusterConfigRefs {
  const component = (text: string | undefined): ComponentRefs => {
    let pod: unknown;
    try {
      pod = text === undefined ? undefined : parseYaml(text);
    } catch {
      pod = undefined;
    }
    const spec = isRecord(pod) && isRecord(pod.spec) ? pod.spec : {};
    const container = Array.isArray(spec.containers) && isRecord(spec.containers[0]) ? spec.containers[0] : {};
    const extraArgs: Record<string, string> = {};
    for (const a of Array.isArray(container.command) ? container.command : []) {
      const m = typeof a === "string" ? /^--([^=]+)=(.*)$/.exec(a) : null;
      if (m) extraArgs[m[1]] = m[2];
    }
    const mounts = new Map<string, { mountPath: string; readOnly?: boolean }>();
    for (const m of Array.isArray(container.volumeMounts) ? container.volumeMounts : [])
      if (isRecord(m) && typeof m.name === "string" && typeof m.mountPath === "string")
        mounts.set(m.name, {
          mountPath: m.mountPath,
          ...(typeof m.readOnly === "boolean" ? { readOnly: m.readOnly } : {}),
        });
    const extraVolumes: HostPathMount[] = [];
    for (const v of Array.isArray(spec.volumes) ? spec.volumes : []) {
      if (!isRecord(v) || typeof v.name !== "string" || !isRecord(v.hostPath)) continue;
      const mount = mounts.get(v.name);
      if (!mount || typeof v.hostPath.path !== "string") continue;
      extraVolumes.push({
        name: v.name,
        hostPath: v.hostPath.path,
        ...mount,
        ...(typeof v.hostPath.type === "string" ? { pathType: v.hostPath.type } : {}),
      });
    }
    return { extraArgs, extraVolumes };
  };
  return {
    apiServer: component(manifests.apiServer),
    controllerManager: component(manifests.controllerManager),
    scheduler: component(manifests.scheduler),
  };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
