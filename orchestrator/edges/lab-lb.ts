// The lab's HAProxy as the API load balancer edge (core/edges.ts LoadBalancerEdge): its
// running state through the admin socket, deregistration as weight 0 plus the lab's
// deregistration delay (infra/lab/lb-impl.ts).
import type { LoadBalancerEdge } from "../core/edges";
import type { NodeEndpoint } from "../core/nodes";
import type { LoadBalancerObservation } from "../core/observations";
import { labLbTargetPort, type LabLbInputs } from "../../infra/lab/lb";
import { labDrainSeconds, labTargets, setDeregistered } from "../../infra/lab/lb-impl";

export class LabLoadBalancerEdge implements LoadBalancerEdge {
  readonly watchable = true;

  constructor(private readonly lb: LabLbInputs) {}

  async observe(nodes: readonly NodeEndpoint[]): Promise<LoadBalancerObservation> {
    const targets = await labTargets(
      this.lb,
      nodes.map((n) => ({ name: n.name, address: n.privateAddress })),
    );
    return {
      name: `lab HAProxy ${this.lb.lab}`,
      targets,
      drainSeconds: labDrainSeconds(this.lb),
      // As infra/lab/lb-impl.ts render() sets it up.
      healthCheck:
        this.lb.serves === "etcd"
          ? `a TCP check of etcd's client port ${labLbTargetPort(this.lb)}`
          : `GET /readyz over TLS on port ${labLbTargetPort(this.lb)}`,
    };
  }

  deregister(node: NodeEndpoint): Promise<void> {
    return setDeregistered(this.lb, { name: node.name, address: node.privateAddress }, true);
  }

  register(node: NodeEndpoint): Promise<void> {
    return setDeregistered(this.lb, { name: node.name, address: node.privateAddress }, false);
  }
}
