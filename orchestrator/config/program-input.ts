// From the validated stack config and a node list to the stack program's input.
import type { HostFileCarry } from "../core/model";
import type { NodeEntry } from "../core/nodes";
import { assignStaticAddress } from "../core/addresses";
import { assignFailureDomain } from "../core/placement";
import { joinPriorityFloor } from "../core/keepalived-conf";
import type { ProgramInput } from "../../infra/program";
import type { StackConfig } from "./";

/**
 * `joining`: the nodes of `nodes` the stored list does not hold yet, the only ones this
 * update may create (infra/node.ts joinsInThisUpdate); absent, any node may be new.
 * `hostFiles`: what they get from a healthy node before they join (core/host-files.ts).
 */
export function programInputFor(
  cfg: StackConfig,
  nodes: NodeEntry[],
  joining?: string[],
  hostFiles?: HostFileCarry,
): ProgramInput {
  // Only when set: a stack without them keeps the program input it always had.
  const access = cfg.sshAccess.agent || cfg.sshAccess.bastion ? cfg.sshAccess : undefined;
  const joins = { ...(joining ? { joining } : {}), ...(hostFiles ? { hostFiles } : {}) };
  // An adopted VRRP group: new nodes rank above its adopted members (never taken back by one).
  const adoptedPriorities = nodes.flatMap((n) => (n.adopted?.keepalived ? [n.adopted.keepalived.priority] : []));
  const floor = adoptedPriorities.length ? { priorityFloor: joinPriorityFloor(adoptedPriorities) } : {};
  if (cfg.intent.provider === "lab") {
    if (!cfg.lab) throw new Error(`internal: ${cfg.file} was loaded without lab settings`);
    return {
      provider: "lab",
      nodes,
      sshUser: cfg.sshUser,
      ...(access ? { sshAccess: access } : {}),
      lab: cfg.lab.vip ? { ...cfg.lab, vip: { ...cfg.lab.vip, ...floor } } : cfg.lab,
      joinDeadlineSeconds: cfg.intent.timeouts.joinSeconds,
      ...(cfg.intent.encryptionAtRest ? { encryptionAtRest: true } : {}),
      ...joins,
    };
  }
  const cloud = cfg.cloud;
  if (!cloud || cloud.provider !== cfg.intent.provider)
    throw new Error(`internal: ${cfg.file} was loaded without ${cfg.intent.provider} settings`);
  // molt:encryptionAtRest reaches the kubeadm init of a new cluster's first node.
  const withVip =
    cloud.provider === "vsphere" && cloud.vsphere.vip && adoptedPriorities.length
      ? { ...cloud, vsphere: { ...cloud.vsphere, vip: { ...cloud.vsphere.vip, ...floor } } }
      : cloud;
  const withEncryption = cfg.intent.encryptionAtRest
    ? { ...withVip, bootstrap: { ...withVip.bootstrap, encryptionAtRest: true } }
    : withVip;
  return {
    provider: cloud.provider,
    nodes,
    cloud: withEncryption,
    ...(access ? { sshAccess: access } : {}),
    ...joins,
  };
}

/**
 * The entry of a node about to be appended to `nodes`, with its failure domain: the
 * configured domain with the fewest up-to-date nodes (orchestrator/core/placement.ts). Decided here,
 * once, and stored with the entry, so an existing node's domain never moves.
 */
export function placeNewNode(cfg: StackConfig, entry: NodeEntry, nodes: NodeEntry[]): NodeEntry {
  const placed = assignFailureDomain(entry, nodes, cfg.cloud?.failureDomains ?? []);
  return assignStaticAddress(placed, nodes, cfg.intent.staticAddressPool ?? []);
}
