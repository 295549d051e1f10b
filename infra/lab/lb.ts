// The lab's load balancer and its attachments as Pulumi resources (runtime in lb-impl.ts).
import * as pulumi from "@pulumi/pulumi";
import { implementation } from "../dynamic";
import type { LabLbHealthCheck, LabSettings } from "./settings";
import type { LabOwner } from "./owner";

export interface LabLbInputs {
  lab: string;
  labRoot: string;
  bridge: string;
  subnet: string;
  port: number;
  /** Run HAProxy in this network namespace (a dual-homed lab machine's) instead of the host's. */
  netns?: string;
  /** Listen on this address instead of the bridge's gateway. */
  bind?: string;
  /**
   * The stack that creates it, which owns the lab (infra/lab/owner.ts): its create claims the
   * lab, its delete leaves a load balancer of another stack running. Absent for one molt did
   * not make (an adopted cluster's) and in the state of a load balancer made before claims.
   */
  owner?: LabOwner;
  /**
   * molt:lab.lbHealthCheck: checks as slow as a cloud's, a deregistration delay, no retry of a
   * refused connection on another server, new servers down until they pass `healthyThreshold`
   * checks. Absent: today's quick checks (every second), which hide most of a slow LB's gaps.
   */
  healthCheck?: LabLbHealthCheck;
  /**
   * What the servers serve, with healthCheck: kube-apiservers (6443, /readyz over TLS), or an
   * etcd-only cluster's client port (2379, a TCP check) so an etcd client can go through it.
   */
  serves?: "apiserver" | "etcd";
}

/** The port a lab node is attached with: etcd's client port for an etcd-only cluster behind a cloud-like LB. */
export function labLbTargetPort(lb: LabLbInputs): number {
  return lb.serves === "etcd" ? 2379 : 6443;
}

/**
 * The address molt's HAProxy connects to an etcd-only cluster's client port from (checks and
 * traffic): its own in the subnet, like a cloud load balancer's (an NLB without client IP
 * preservation), outside the machines' range (.10-.249) and not the gateway, from which the
 * machines refuse etcd's ports (machine-impl.ts etcdRefusalRule). Undefined where it serves
 * kube-apiservers (from the gateway, as before).
 */
export function labLbSourceAddress(lb: LabLbInputs): string | undefined {
  if (lb.serves !== "etcd") return undefined;
  const m = /^(\d+\.\d+\.\d+)\.0\/24$/.exec(lb.subnet);
  return m ? `${m[1]}.9` : undefined;
}

export interface LabLbAttachmentInputs {
  lb: LabLbInputs;
  server: string;
  address: string;
  port: number;
}

type In<T> = { [K in keyof T]: pulumi.Input<T[K]> };

/** The load balancer a lab stack's nodes are attached to: the cluster's own (molt:lab.loadBalancer), or molt's. */
export function labLbInputs(lab: LabSettings, kubernetes = true): LabLbInputs {
  const named = lab.loadBalancer;
  const [host, port] = named ? named.address.split(":") : [];
  return {
    lab: named?.lab ?? lab.lab,
    labRoot: lab.labRoot,
    bridge: lab.bridge,
    subnet: lab.subnet,
    port: named ? Number(port) : lab.lbPort,
    ...(named?.netns ? { netns: named.netns } : {}),
    ...(named ? { bind: named.bind ?? host } : {}),
    ...(!named && lab.owner ? { owner: lab.owner } : {}),
    ...(lab.lbHealthCheck ? { healthCheck: lab.lbHealthCheck, serves: kubernetes ? "apiserver" : "etcd" } : {}),
  };
}

export function labLbDiff(olds: LabLbInputs, news: LabLbInputs): pulumi.dynamic.DiffResult {
  const replaces = (["lab", "labRoot", "bridge", "subnet", "port", "netns", "bind"] as const).filter(
    (k) => olds[k] !== news[k],
  );
  return { changes: replaces.length > 0, replaces, deleteBeforeReplace: true };
}

const lbProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: LabLbInputs) {
    return implementation("infra/lab/lb-impl").createLb(inputs);
  },
  // The owner is not compared: a load balancer made before claims stays as it is; nor are its
  // checks (the next attachment's reload applies them). Replaced old first: both would live in
  // one directory (its pid file, its configuration) and hold one source address on the bridge.
  async diff(_id: string, olds: LabLbInputs, news: LabLbInputs) {
    return labLbDiff(olds, news);
  },
  async delete(_id: string, props: LabLbInputs) {
    await implementation("infra/lab/lb-impl").removeLb(props);
  },
};

export class LabLoadBalancer extends pulumi.dynamic.Resource {
  declare readonly address: pulumi.Output<string>;
  constructor(name: string, args: In<LabLbInputs>, opts?: pulumi.CustomResourceOptions) {
    super(lbProvider, name, { ...args, address: undefined }, opts, "molt", "LabLoadBalancer");
  }
}

const attachmentProvider: pulumi.dynamic.ResourceProvider = {
  async create(inputs: LabLbAttachmentInputs) {
    return implementation("infra/lab/lb-impl").attach(inputs);
  },
  async diff(_id: string, olds: LabLbAttachmentInputs, news: LabLbAttachmentInputs) {
    const changed = olds.server !== news.server || olds.address !== news.address || olds.port !== news.port;
    return { changes: changed, replaces: changed ? ["server"] : [], deleteBeforeReplace: true };
  },
  async delete(_id: string, props: LabLbAttachmentInputs) {
    await implementation("infra/lab/lb-impl").detach(props);
  },
  // A refresh sees a server taken out of the load balancer, or pointed elsewhere, by hand.
  async read(id: string, props: LabLbAttachmentInputs) {
    const target: string | undefined = implementation("infra/lab/lb-impl").attachedTarget(props);
    if (target === undefined) return { id: "", props: {} };
    const [address, port] = [
      target.slice(0, target.lastIndexOf(":")),
      Number(target.slice(target.lastIndexOf(":") + 1)),
    ];
    return { id, props: { ...props, address, port } };
  },
};

export class LabLbAttachment extends pulumi.dynamic.Resource {
  constructor(
    name: string,
    args: {
      lb: pulumi.Input<LabLbInputs>;
      server: pulumi.Input<string>;
      address: pulumi.Input<string>;
      port: pulumi.Input<number>;
    },
    opts?: pulumi.CustomResourceOptions,
  ) {
    super(attachmentProvider, name, args, opts, "molt", "LabLbAttachment");
  }
}
