// The real edges of a run: the engine-backed stack, SSH access to the nodes, and the API load
// balancer where molt can ask it.
import { EngineStack, type EngineStackOptions } from "../stack/edge";
import { checkProviderPlugins } from "../stack/plugins";
import { SshNodeAccess } from "./nodes";
import type { Edges, LoadBalancerEdge } from "../core/edges";
import type { StackConfig } from "../config";
import { labLbInputs } from "../../infra/lab/lb";
import { LabLoadBalancerEdge } from "./lab-lb";

export type EdgeOptions = EngineStackOptions;

export type EdgeFactory = (o: EdgeOptions) => Promise<Edges>;

/**
 * Test and bench only: retire without asking the load balancer (the order before it was
 * endpoint aware: the API server stops, the load balancer's checks notice), for contrast.
 */
export const LB_UNAWARE_ENV = "MOLT_TEST_RETIRE_WITHOUT_LB";

/**
 * The API load balancer molt deregisters retiring nodes from and waits on: the lab's HAProxy
 * (for an etcd-only cluster only where it serves etcd, molt:lab.lbHealthCheck). None with a VIP.
 */
export function loadBalancerEdgeFor(config: StackConfig, env = process.env): LoadBalancerEdge | undefined {
  if (env[LB_UNAWARE_ENV] === "1") return undefined;
  const lab = config.lab;
  if (lab && !lab.vip) {
    const kubernetes = config.intent.kubernetesVersion !== undefined;
    const lb = labLbInputs(lab, kubernetes);
    return kubernetes || lb.serves === "etcd" ? new LabLoadBalancerEdge(lb) : undefined;
  }
  return undefined;
}

export const openEdges: EdgeFactory = async (o) => {
  // A run that may `up` needs the provider's engine plugins, which molt never downloads
  // during a run: missing ones are refused here, before the stack is opened or changed.
  if (o.create !== false) checkProviderPlugins(o.config.intent.provider, o.env);
  const nodes = new SshNodeAccess(o.config.sshAccess);
  // A surge's new node is connected while its `up` finishes (edges/nodes.ts warm).
  const onNodeList = (s: Parameters<SshNodeAccess["warm"]>[0]) => nodes.warm(s);
  const lb = loadBalancerEdgeFor(o.config);
  return { stack: await EngineStack.open({ ...o, onNodeList }), nodes, ...(lb ? { lb } : {}) };
};
