// VrrpGroupAuth's create (infra/vip/group-auth.ts): the member's keepalived.conf, read over
// its pinned SSH session, parsed by the core (orchestrator/core/keepalived-conf.ts). Errors
// name what is wrong, never the configuration's text (it holds the password).
import { vrrpGroupOf } from "../../orchestrator/core/keepalived-conf";
import { SshSession, type SshTarget } from "../remote/ssh";
import { KEEPALIVED_CONF } from "./keepalived";

export interface GroupAuthInputs {
  seed: SshTarget;
  vip: string;
  virtualRouterId: number;
}

/** "TYPE PASSWORD" of the group the member runs for the VIP, or "" when it has no authentication. */
export async function readGroupAuth(inputs: GroupAuthInputs): Promise<string> {
  const ssh = await SshSession.connect(inputs.seed);
  let text: string;
  try {
    const sudo = inputs.seed.user === "root" ? "" : "sudo -n ";
    const r = await ssh.exec(`${sudo}cat ${KEEPALIVED_CONF}`);
    if (r.code !== 0)
      throw new Error(
        `cannot read ${KEEPALIVED_CONF} on ${inputs.seed.host} (the member a new node's keepalived joins ` +
          `through): exit ${r.code}: ${r.stderr.trim().split("\n")[0] ?? ""}`,
      );
    text = r.stdout;
  } finally {
    ssh.close();
  }
  return groupAuthOf(text, inputs);
}

/** The parsing half of readGroupAuth (unit-tested without SSH). */
export function groupAuthOf(text: string, inputs: Omit<GroupAuthInputs, "seed"> & { seed: { host: string } }): string {
  const r = vrrpGroupOf(text, inputs.vip, inputs.seed.host);
  if (r.problems.length || !("group" in r)) throw new Error(r.problems.join("; "));
  if (r.group.virtualRouterId !== inputs.virtualRouterId)
    throw new Error(
      `${inputs.seed.host}'s keepalived serves ${inputs.vip} as virtual_router_id ${r.group.virtualRouterId}, ` +
        `not molt:apiEndpoint.virtualRouterId ${inputs.virtualRouterId}: a new node would start a second group ` +
        "for the same VIP; set molt:apiEndpoint.virtualRouterId to the group's",
    );
  return r.group.auth ? `${r.group.auth.type} ${r.group.auth.pass}` : "";
}
