// The real edges of a run: the engine-backed stack, SSH access to the nodes, and the API load
// balancer where molt can ask it (the lab's HAProxy, an Azure backend pool).
import { EngineStack, type EngineStackOptions } from "../stack/edge";
import { checkProviderPlugins } from "../stack/plugins";
import { SshNodeAccess } from "./nodes";
import type { Edges, LoadBalancerEdge } from "../core/edges";
import type { StackConfig } from "../config";
import { labLbInputs } from "../../infra/lab/lb";
import { LabLoadBalancerEdge } from "./lab-lb";
import { AzureApiTargets, type ArmWithPost } from "../../infra/providers/azure/api-targets";
import { armClient } from "../../infra/providers/azure/pool-membership-impl";

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
  const azure = (config.cloud as { azure?: { apiBackendPoolId?: unknown } } | undefined)?.azure;
  if (config.cloud?.provider === "azure" && typeof azure?.apiBackendPoolId === "string")
    return new AzureApiTargets(azure.apiBackendPoolId, lazyArm());
  return undefined;
}

/**
 * Why retirement is not load-balancer aware on this stack although a load balancer serves it,
 * for a warning at the start of a run: AWS's Elastic Load Balancing has no client in molt yet.
 */
export function loadBalancerGap(config: StackConfig, env = process.env): string | undefined {
  if (env[LB_UNAWARE_ENV] === "1") return undefined;
  if (config.cloud?.provider !== "aws") return undefined;
  return (
    "molt cannot ask the AWS load balancer (no Elastic Load Balancing client in this build): a retiring node's " +
    "API server stops before the load balancer's health check notices (its shutdown delay, " +
    "molt:bootstrap.apiServerShutdownDelaySeconds, must cover that check), and a new node is counted in " +
    "without waiting for InService"
  );
}

/** ARM with DefaultAzureCredential, made at the first call (an Azure run only loads @azure/identity then). */
function lazyArm(): ArmWithPost {
  let client: Promise<ArmWithPost> | undefined;
  const arm = () =>
    (client ??= import("@azure/identity").then(({ DefaultAzureCredential }) =>
      armClient(new DefaultAzureCredential()),
    ));
  return {
    get: async (id, v) => (await arm()).get(id, v),
    put: async (id, v, body, etag) => (await arm()).put(id, v, body, etag),
    post: async (id, v) => (await arm()).post(id, v),
  };
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
