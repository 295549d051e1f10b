// The security group of a cluster's control-plane instances, the way KubeOne's AWS example
// builds its `common` group: all traffic between members of the group (etcd, kubelet,
// controllers, and whatever the CNI needs: VXLAN, BGP, IP-in-IP, Geneve ...), the API from
// its clients and from the load balancer's subnets (health checks), SSH on the port molt
// uses. Create it once per cluster, not per node.
import { awsSdk } from "../sdk";
import * as pulumi from "@pulumi/pulumi";

export interface AwsControlPlaneSecurityGroupArgs {
  region?: string;
  vpcId: pulumi.Input<string>;
  /**
   * Who may reach the API servers on 6443. With the target group's client IP preservation
   * off (what molt needs, see docs/clouds.md) the instances see the NLB's own private
   * addresses, not the clients': list the NLB's subnets here (they are also where its
   * health checks come from), plus any client that reaches nodes directly.
   */
  apiSourceCidrs: string[];
  /**
   * The subnets of the API network load balancer: its health checks (and, without client
   * IP preservation, all API traffic) come from there. Leave it out only when
   * apiSourceCidrs already holds them.
   */
  loadBalancerSubnetCidrs?: string[];
  /** Where molt (and operators) connect from over SSH. */
  sshSourceCidrs: string[];
  /** The port molt's SSH uses (molt:ssh.port; default 22). */
  sshPort?: number;
  tags?: Record<string, string>;
}

export class AwsControlPlaneSecurityGroup extends pulumi.ComponentResource {
  readonly id: pulumi.Output<string>;

  constructor(name: string, args: AwsControlPlaneSecurityGroupArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:aws:ControlPlaneSecurityGroup", name, {}, opts);
    const sshPort = args.sshPort ?? 22;
    // Named rules for what the control plane itself needs, kept beside the all-traffic rule
    // so a reader (or whoever narrows that rule) sees them.
    const between = (fromPort: number, toPort: number, description: string) => ({
      protocol: "tcp",
      fromPort,
      toPort,
      self: true,
      description,
    });
    const sg = new (awsSdk().ec2.SecurityGroup)(
      name,
      {
        ...(args.region ? { region: args.region } : {}),
        vpcId: args.vpcId,
        description: "molt: Kubernetes control-plane nodes",
        ingress: [
          {
            protocol: "-1",
            fromPort: 0,
            toPort: 0,
            self: true,
            description: "all traffic between control-plane nodes (etcd, kubelet, controllers, CNI)",
          },
          {
            protocol: "tcp",
            fromPort: 6443,
            toPort: 6443,
            cidrBlocks: args.apiSourceCidrs,
            description: "Kubernetes API",
          },
          ...(args.loadBalancerSubnetCidrs?.length
            ? [
                {
                  protocol: "tcp",
                  fromPort: 6443,
                  toPort: 6443,
                  cidrBlocks: args.loadBalancerSubnetCidrs,
                  description: "Kubernetes API from the load balancer (traffic and health checks)",
                },
              ]
            : []),
          {
            protocol: "tcp",
            fromPort: sshPort,
            toPort: sshPort,
            cidrBlocks: args.sshSourceCidrs,
            description: "SSH (molt)",
          },
          between(6443, 6443, "Kubernetes API between control-plane nodes"),
          between(2379, 2380, "etcd client and peer"),
          between(10250, 10250, "kubelet"),
          between(10257, 10257, "kube-controller-manager"),
          between(10259, 10259, "kube-scheduler"),
        ],
        egress: [{ protocol: "-1", fromPort: 0, toPort: 0, cidrBlocks: ["0.0.0.0/0"], description: "all outbound" }],
        tags: { ...args.tags, Name: name },
      },
      { parent: this },
    );
    this.id = sg.id;
    this.registerOutputs({ id: this.id });
  }
}
