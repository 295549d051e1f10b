// How molt reaches nodes besides the stack's own key (molt:ssh): the ssh-agent, and a jump
// host. One place builds the agent/bastion part of every connection: the program's
// RemoteCommands and join material, and the orchestrator's SSH sessions.
import type { SshAccessSettings } from "../../orchestrator/core/nodes";
import * as pulumi from "@pulumi/pulumi";
import type { BastionTarget, SshCredentials } from "./ssh";

/** The agent and bastion fields of a connection (plain values: the orchestrator's sessions). */
export function accessFields(
  access: SshAccessSettings | undefined,
  privateKey: string | undefined,
): { agent?: true; bastion?: BastionTarget } {
  if (!access) return {};
  const b = access.bastion;
  const bastionCredentials: SshCredentials = {
    ...(privateKey ? { privateKey } : {}),
    ...(b?.agent || access.agent ? { agent: true as const } : {}),
  };
  return {
    ...(access.agent ? { agent: true as const } : {}),
    ...(b ? { bastion: { host: b.host, port: b.port, user: b.user, hostKey: b.hostKey, ...bastionCredentials } } : {}),
  };
}

/** The same for a program's connection (the key is a secret output). */
export function accessInputs(
  access: SshAccessSettings | undefined,
  privateKey: pulumi.Input<string>,
): { agent?: true; bastion?: pulumi.Output<BastionTarget> } {
  if (!access) return {};
  const { agent } = accessFields(access, undefined);
  return {
    ...(agent ? { agent } : {}),
    ...(access.bastion
      ? {
          bastion: pulumi.secret(
            pulumi.output(privateKey).apply((k) => accessFields(access, k).bastion as BastionTarget),
          ),
        }
      : {}),
  };
}
