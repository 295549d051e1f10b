// The lab settings every lab resource reads (molt:lab.*): which lab, its bridge and subnet,
// how the API endpoint is served.
import type { VipSettings } from "../vip/keepalived";
import type { LabOwner } from "./owner";

export interface LabSettings {
  lab: string;
  labRoot: string;
  bridge: string;
  subnet: string;
  lbPort: number;
  /** molt:apiEndpoint mode vip: keepalived in the machines instead of the lab's HAProxy. */
  vip?: VipSettings;
  /** The host takes no address on the bridge: machines are reached through a bastion only. */
  isolated?: true;
  /**
   * An existing HAProxy of the lab (an adopted cluster's, run by lb-impl in a machine's
   * network namespace) that new nodes are attached to, instead of molt's own.
   */
  loadBalancer?: { lab: string; address: string; netns?: string; bind?: string };
  /**
   * molt:lab.lbHealthCheck: molt's HAProxy checks as slowly as a cloud load balancer (infra/lab/lb-impl.ts),
   * to prove the endpoint keeps every request on such a load balancer. Absent: checks every second.
   */
  lbHealthCheck?: LabLbHealthCheck;
  /** The stack the lab belongs to (infra/lab/owner.ts): set by the run, claimed by the load balancer it creates. */
  owner?: LabOwner;
}

/** A cloud-like health check and deregistration delay for the lab's HAProxy (AWS's words). */
export interface LabLbHealthCheck {
  intervalSeconds: number;
  unhealthyThreshold: number;
  healthyThreshold: number;
  deregistrationDelaySeconds: number;
}
