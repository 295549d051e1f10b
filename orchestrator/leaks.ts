// Leaked machines during a rollout: listed and reported at the start (before anything
// changes), terminated with --terminate-leaked at the end of a converged run, when etcd's
// members are known and stray members are gone (core/leaks.ts decides).
import type { MachineInventory, StackEdge } from "./core/edges";
import { isNodeName } from "./core/plan/rules";
import { leakedMachines, TerminateMachinesError, type LeakVerdict } from "./core/leaks";
import type { Stop } from "./core/memory";
import type { World } from "./core/model";
import type { Member } from "./core/observations";
import type { StackConfig } from "./config";
import { awsRegionOf } from "./edges/aws-client";
import { awsInventory } from "./edges/aws-inventory";
import { azureInventory } from "./edges/azure-inventory";
import type { RolloutEvent } from "./events";

/** The inventory of a stack's cloud, where molt can list its machines (AWS and Azure). */
export function inventoryOf(cfg: StackConfig, env?: Record<string, string | undefined>): MachineInventory | undefined {
  const cloud = cfg.cloud;
  if (cloud?.provider === "azure") {
    const a = cloud.azure;
    // The subscription is the one of the node settings' resource ids (the schema checks their form).
    const subscription = /^\/subscriptions\/([^/]+)\//i.exec(String(a.subnetId))?.[1];
    if (!subscription || typeof a.resourceGroupName !== "string") return undefined;
    return azureInventory({
      subscription,
      resourceGroupName: a.resourceGroupName,
      clusterName: cloud.bootstrap.clusterName ?? "kubernetes",
    });
  }
  if (cloud?.provider !== "aws") return undefined;
  const region = awsRegionOf(cfg, { ...process.env, ...env });
  if (!region) return undefined;
  return awsInventory({
    region,
    clusterName: cloud.bootstrap.clusterName ?? "kubernetes",
    env: { ...process.env, ...env },
  });
}

export interface LeakWatch {
  atStart(): Promise<void>;
  atEnd(end: Stop, world: World): Promise<void>;
}

export function leakWatch(o: {
  inventory: MachineInventory | undefined;
  terminate: boolean;
  stack: () => StackEdge;
  emit: (e: RolloutEvent) => void;
}): LeakWatch {
  const inv = o.inventory;
  const verdicts = async (members: readonly Member[] | undefined, terminate: boolean) => {
    const stack = o.stack();
    if (!inv || !stack.resourceIds) return [];
    const [listed, held] = await Promise.all([inv.list(), stack.resourceIds(inv.resourceType)]);
    const own = (node: string) => isNodeName(stack.name, node);
    return leakedMachines(listed, held, members, terminate, own, inv.idKey ? (id) => inv.idKey!(id) : undefined);
  };
  /** `failed`: the machines --terminate-leaked tried and the cloud refused, with its error. */
  const report = (v: LeakVerdict[], terminated: boolean, failed = new Map<string, string>()) =>
    o.emit({
      type: "leaked-machines",
      where: inv!.where,
      machines: v.map((x) => {
        const refused = x.action === "terminate" ? failed.get(x.machine.id) : undefined;
        return {
          id: x.machine.id,
          ...(x.machine.node ? { node: x.machine.node } : {}),
          ...(x.machine.address ? { address: x.machine.address } : {}),
          state: x.machine.state,
          ...(x.machine.launchedAt ? { launchedAt: x.machine.launchedAt } : {}),
          action:
            refused !== undefined
              ? "terminate-failed"
              : x.action === "terminate"
                ? terminated
                  ? "terminated"
                  : "terminate"
                : "kept",
          ...(x.action === "keep" ? { reason: x.reason } : refused !== undefined ? { reason: refused } : {}),
        };
      }),
    });
  const warn = (what: string, e: unknown) =>
    o.emit({
      type: "warning",
      message: `${what} on ${inv!.where} failed: ${e instanceof Error ? e.message : String(e)}`,
    });
  return {
    async atStart() {
      if (!inv) return;
      try {
        const v = await verdicts(undefined, false);
        if (v.length) report(v, false);
      } catch (e) {
        warn("listing machines a killed run may have left", e);
      }
    },
    async atEnd(end, world) {
      if (!inv || !o.terminate) return;
      if (end.result !== "succeeded" && end.result !== "noop") {
        o.emit({
          type: "warning",
          message: "--terminate-leaked: the run did not converge, so no leaked machine was terminated",
        });
        return;
      }
      let v: LeakVerdict[];
      try {
        v = await verdicts(world.etcd?.members, true);
      } catch (e) {
        warn("listing leaked machines to terminate", e);
        return;
      }
      try {
        await inv.terminate(v.filter((x) => x.action === "terminate").map((x) => x.machine.id));
        if (v.length) report(v, true);
      } catch (e) {
        // Some were terminated, some not: the report says which, the warning both lists.
        if (e instanceof TerminateMachinesError) report(v, true, new Map(e.failed.map((f) => [f.id, f.error])));
        warn("terminating leaked machines", e);
      }
    },
  };
}
