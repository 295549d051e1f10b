// keepalived on a control-plane node as a RemoteCommand: set up (and started) after the
// machine and before kubeadm/etcd, so the VIP can come up as soon as the node's endpoint is
// healthy; stopped (VIP released) when the node is torn down. Used by the vSphere node and
// the lab node alike (infra/vip/keepalived.ts renders both scripts). A node that joins
// through a member reads the group's authentication from it first (group-auth.ts).
import * as pulumi from "@pulumi/pulumi";
import { RemoteCommand, type ConnectionArgs } from "../remote/command";
import { VrrpGroupAuth } from "./group-auth";
import {
  renderKeepalivedReleaseScript,
  renderKeepalivedSetupScript,
  type KeepalivedRunMode,
  type VipCheck,
  type VipSettings,
} from "./keepalived";

export interface KeepalivedCommandArgs {
  connection: pulumi.Input<ConnectionArgs>;
  vip: VipSettings;
  node: { name: string; generation: number; check: VipCheck };
  /** The node's own address (VRRP runs on the interface holding it). */
  address: pulumi.Input<string>;
  runMode: KeepalivedRunMode;
  install: "packages" | "image";
  /** A replaced machine gets keepalived again. */
  machineId: pulumi.Input<string>;
  /** Non-secret environment for the scripts (the lab's NODE_NAME for reports). */
  environment?: Record<string, pulumi.Input<string>>;
  /** The member a joining node joins through: the group's authentication is read there. */
  seed?: { connection: pulumi.Input<ConnectionArgs>; dependsOn: pulumi.Resource[] };
}

export function keepalivedCommand(
  name: string,
  a: KeepalivedCommandArgs,
  opts: pulumi.CustomResourceOptions,
): RemoteCommand {
  const auth = a.seed
    ? new VrrpGroupAuth(
        `${name}-auth`,
        { seed: a.seed.connection, vip: a.vip.address, virtualRouterId: a.vip.virtualRouterId },
        { parent: opts.parent, dependsOn: a.seed.dependsOn },
      ).auth
    : undefined;
  return new RemoteCommand(
    name,
    {
      connection: a.connection,
      ...(auth ? { stdin: auth } : {}),
      create: pulumi.output(a.address).apply((address) =>
        renderKeepalivedSetupScript({
          vip: a.vip,
          node: { ...a.node, address },
          runMode: a.runMode,
          install: a.install,
        }),
      ),
      delete: renderKeepalivedReleaseScript(a.vip, "release"),
      ...(a.environment ? { environment: a.environment } : {}),
      triggers: [a.machineId],
    },
    opts,
  );
}
