// The real edges of a run: the engine-backed stack, SSH access to the nodes, and the API load
// balancer where molt can ask it (the lab's HAProxy, an Azure backend pool, an AWS target group
// or classic ELB).
import { EngineStack, type EngineStackOptions } from "../stack/edge";
import { checkProviderPlugins } from "../stack/plugins";
import { SshNodeAccess } from "./nodes";
import type { Edges, LoadBalancerEdge } from "../core/edges";
import type { StackConfig } from "../config";
import { labLbInputs } from "../../infra/lab/lb";
import { LabLoadBalancerEdge } from "./lab-lb";
import { AzureApiTargets, type ArmWithPost } from "../../infra/providers/azure/api-targets";
import { armClient } from "../../infra/providers/azure/pool-membership-impl";
import { AwsApiTargets, type AwsTargetsOf, type ElbApi } from "../../infra/providers/aws/api-targets";
import type { AwsNodeSettings } from "../../infra/providers/aws/config";
import { awsRegionOf } from "./aws-client";
import { awsElbApi } from "./aws-elb";

export type EdgeOptions = EngineStackOptions;

export type EdgeFactory = (o: EdgeOptions) => Promise<Edges>;

/**
 * Test and bench only: retire without asking the load balancer (the order before it was
 * endpoint aware: the API server stops, the load balancer's checks notice), for contrast.
 */
export const LB_UNAWARE_ENV = "MOLT_TEST_RETIRE_WITHOUT_LB";

/**
 * The API load balancer molt deregisters retiring nodes from and waits on: the lab's HAProxy
 * (for an etcd-only cluster only where it serves etcd, molt:lab.lbHealthCheck), an Azure backend
 * pool, an AWS target group or classic ELB (molt:aws.loadBalancer). None with a VIP.
 */
export function loadBalancerEdgeFor(
  config: StackConfig,
  env: Record<string, string | undefined> = process.env,
): LoadBalancerEdge | undefined {
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
  if (config.cloud?.provider === "aws") return awsApiTargets(config, env);
  return undefined;
}

/**
 * The AWS stack's target group or classic ELB over Elastic Load Balancing, in the target group's
 * own region (its ARN names it), else the stack's (edges/aws-client.ts awsRegionOf).
 */
function awsApiTargets(config: StackConfig, env: Record<string, string | undefined>): LoadBalancerEdge {
  const lb = (config.cloud as { aws: AwsNodeSettings }).aws.loadBalancer;
  const targets: AwsTargetsOf =
    "classicElb" in lb ? { classicElb: String(lb.classicElb) } : { targetGroupArn: String(lb.targetGroupArn) };
  const region = "targetGroupArn" in targets ? targets.targetGroupArn.split(":")[3] : awsRegionOf(config, env);
  return new AwsApiTargets(targets, region ? awsElbApi({ region, env }) : noRegion());
}

/** Without a region no ELB can be asked: every target is unobserved, so nothing retires blind. */
function noRegion(): ElbApi {
  const fail = () =>
    Promise.reject(
      new Error(
        "no AWS region for the classic ELB: set molt:aws.region or aws:region in the stack file (or AWS_REGION)",
      ),
    );
  return {
    describeTargetHealth: fail,
    deregisterTargets: fail,
    registerTargets: fail,
    targetGroupTiming: fail,
    describeInstanceHealth: fail,
    deregisterInstances: fail,
    registerInstances: fail,
    classicTiming: fail,
  };
}

/**
 * Why retirement is not load-balancer aware on this stack although a load balancer serves it,
 * for a warning at the start of a run: vSphere's API endpoint without molt:apiEndpoint mode vip
 * is a load balancer outside molt, which molt cannot ask.
 */
export function loadBalancerGap(config: StackConfig, env: Record<string, string | undefined> = process.env) {
  if (env[LB_UNAWARE_ENV] === "1") return undefined;
  if (config.cloud?.provider !== "vsphere" || config.intent.vip) return undefined;
  return (
    "molt cannot ask the load balancer in front of the vSphere nodes (it is outside molt; molt:apiEndpoint mode " +
    "vip puts the endpoint in molt's hands): a retiring node's API server stops before that load balancer's " +
    "health check notices (its shutdown delay, molt:bootstrap.apiServerShutdownDelaySeconds, must cover that " +
    "check), and a new node is counted in without the load balancer calling it healthy"
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
  // The run's environment over the process's, as the engine sees it (AWS credentials among it).
  const lb = loadBalancerEdgeFor(o.config, { ...process.env, ...o.env });
  return { stack: await EngineStack.open({ ...o, onNodeList }), nodes, ...(lb ? { lb } : {}) };
};
