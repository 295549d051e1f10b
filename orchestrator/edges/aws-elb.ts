// ElbApi (infra/providers/aws/api-targets.ts) on Elastic Load Balancing itself: ELBv2 for an
// NLB's target group, the classic API for a classic ELB. Both answer at the same regional
// endpoint; the SDK's clients sign with the environment's or the default chain's credentials.
import type { ElasticLoadBalancingV2Client, TargetGroup } from "@aws-sdk/client-elastic-load-balancing-v2";
import type {
  ElasticLoadBalancingClient,
  InstanceState,
  LoadBalancerDescription,
} from "@aws-sdk/client-elastic-load-balancing";
import type { ElbApi, LbTiming } from "../../infra/providers/aws/api-targets";
import { awsCall, awsClientConfig, CALL_MS, type AwsClientSettings } from "./aws-client";
import { elbClassicSdk, elbV2Sdk } from "./aws-sdks";

/** The API server's port: the target group's targets are registered (and deregistered) on it. */
export const API_PORT = 6443;

/** AWS's defaults, for a description that leaves a value out. */
const TARGET_GROUP_DEREGISTRATION_DELAY = 300;

/** Timing is read again after this long: a deregistration's wait asks health every second, not timing. */
const TIMING_TTL_MS = 60_000;

export function awsElbApi(s: AwsClientSettings): ElbApi {
  const v2sdk = elbV2Sdk();
  const { ElasticLoadBalancingV2Client, DeregisterTargetsCommand, DescribeTargetGroupAttributesCommand } = v2sdk;
  const { DescribeTargetHealthCommand, RegisterTargetsCommand } = v2sdk;
  const classicSdk = elbClassicSdk();
  const { ElasticLoadBalancingClient, DeregisterInstancesFromLoadBalancerCommand } = classicSdk;
  const { DescribeInstanceHealthCommand, DescribeLoadBalancerAttributesCommand } = classicSdk;
  const { RegisterInstancesWithLoadBalancerCommand } = classicSdk;
  const v2 = new ElasticLoadBalancingV2Client(awsClientConfig(s));
  const classic = new ElasticLoadBalancingClient(awsClientConfig(s));
  const deadline = () => ({ abortSignal: AbortSignal.timeout(CALL_MS) });
  const call = <T>(action: string, what: string, send: () => Promise<T>) =>
    awsCall(`elasticloadbalancing:${action}`, what, send);
  const tg = (arn: string) => `target group ${arn}`;
  const elb = (name: string) => `classic ELB ${name}`;
  const targets = (ids: string[]) => ids.map((Id) => ({ Id, Port: API_PORT }));
  const instances = (ids: string[]) => ids.map((InstanceId) => ({ InstanceId }));
  const timing = memo(TIMING_TTL_MS);

  const instanceHealth = async (name: string, ids: string[]): Promise<InstanceState[]> => {
    const out = await classic.send(
      new DescribeInstanceHealthCommand({ LoadBalancerName: name, Instances: instances(ids) }),
      deadline(),
    );
    return out.InstanceStates ?? [];
  };

  return {
    async describeTargetHealth(arn, ids) {
      const out = await call("DescribeTargetHealth", tg(arn), () =>
        v2.send(new DescribeTargetHealthCommand({ TargetGroupArn: arn, Targets: targets(ids) }), deadline()),
      );
      return (out.TargetHealthDescriptions ?? []).flatMap((d) =>
        d.Target?.Id
          ? [
              {
                id: d.Target.Id,
                state: d.TargetHealth?.State ?? "unknown",
                ...(d.TargetHealth?.Reason ? { reason: d.TargetHealth.Reason } : {}),
                ...(d.TargetHealth?.Description ? { description: d.TargetHealth.Description } : {}),
              },
            ]
          : [],
      );
    },
    async deregisterTargets(arn, ids) {
      await call("DeregisterTargets", tg(arn), () =>
        v2.send(new DeregisterTargetsCommand({ TargetGroupArn: arn, Targets: targets(ids) }), deadline()),
      );
    },
    async registerTargets(arn, ids) {
      await call("RegisterTargets", tg(arn), () =>
        v2.send(new RegisterTargetsCommand({ TargetGroupArn: arn, Targets: targets(ids) }), deadline()),
      );
    },
    targetGroupTiming: (arn) =>
      timing(`tg ${arn}`, async (): Promise<LbTiming> => {
        const [group, attributes] = await Promise.all([
          call("DescribeTargetGroups", tg(arn), () => targetGroup(v2, arn, deadline)),
          call("DescribeTargetGroupAttributes", tg(arn), () =>
            v2.send(new DescribeTargetGroupAttributesCommand({ TargetGroupArn: arn }), deadline()),
          ),
        ]);
        const delay = attributes.Attributes?.find((a) => a.Key === "deregistration_delay.timeout_seconds")?.Value;
        return {
          drainSeconds: seconds(delay, TARGET_GROUP_DEREGISTRATION_DELAY),
          intervalSeconds: group.HealthCheckIntervalSeconds ?? 30,
          unhealthyThreshold: group.UnhealthyThresholdCount ?? 3,
        };
      }),
    async describeInstanceHealth(name, ids) {
      const states = await call("DescribeInstanceHealth", elb(name), async () => {
        try {
          return await instanceHealth(name, ids);
        } catch (e) {
          // One instance the ELB cannot describe fails the whole call: ask for each, leave those out.
          if (!isInvalidInstance(e)) throw e;
          const each = await Promise.all(
            ids.map((id) =>
              instanceHealth(name, [id]).catch((x: unknown) => {
                if (isInvalidInstance(x)) return [];
                throw x;
              }),
            ),
          );
          return each.flat();
        }
      });
      return states.flatMap((s) =>
        s.InstanceId
          ? [
              {
                id: s.InstanceId,
                state: s.State ?? "Unknown",
                ...(s.ReasonCode && s.ReasonCode !== "N/A" ? { reasonCode: s.ReasonCode } : {}),
                ...(s.Description && s.Description !== "N/A" ? { description: s.Description } : {}),
              },
            ]
          : [],
      );
    },
    async deregisterInstances(name, ids) {
      await call("DeregisterInstancesFromLoadBalancer", elb(name), () =>
        classic.send(
          new DeregisterInstancesFromLoadBalancerCommand({ LoadBalancerName: name, Instances: instances(ids) }),
          deadline(),
        ),
      );
    },
    async registerInstances(name, ids) {
      await call("RegisterInstancesWithLoadBalancer", elb(name), () =>
        classic.send(
          new RegisterInstancesWithLoadBalancerCommand({ LoadBalancerName: name, Instances: instances(ids) }),
          deadline(),
        ),
      );
    },
    classicTiming: (name) =>
      timing(`elb ${name}`, async (): Promise<LbTiming> => {
        const [lb, attributes] = await Promise.all([
          call("DescribeLoadBalancers", elb(name), () => classicLoadBalancer(classic, name, deadline)),
          call("DescribeLoadBalancerAttributes", elb(name), () =>
            classic.send(new DescribeLoadBalancerAttributesCommand({ LoadBalancerName: name }), deadline()),
          ),
        ]);
        const draining = attributes.LoadBalancerAttributes?.ConnectionDraining;
        return {
          drainSeconds: draining?.Enabled ? (draining.Timeout ?? 300) : 0,
          intervalSeconds: lb.HealthCheck?.Interval ?? 30,
          unhealthyThreshold: lb.HealthCheck?.UnhealthyThreshold ?? 2,
        };
      }),
  };
}

/** The item `found` picks, across a Describe call's pages (Marker / NextMarker). */
async function findPaged<P extends { NextMarker?: string }, T>(
  page: (marker: string | undefined) => Promise<P>,
  found: (p: P) => T | undefined,
  notFound: string,
): Promise<T> {
  let marker: string | undefined;
  do {
    const p = await page(marker);
    const hit = found(p);
    if (hit) return hit;
    marker = p.NextMarker || undefined;
  } while (marker);
  throw Object.assign(new Error("AWS did not list it"), { name: notFound });
}

/** The target group, across DescribeTargetGroups' pages. */
function targetGroup(
  client: ElasticLoadBalancingV2Client,
  arn: string,
  deadline: () => { abortSignal: AbortSignal },
): Promise<TargetGroup> {
  const { DescribeTargetGroupsCommand } = elbV2Sdk();
  return findPaged(
    (marker) =>
      client.send(
        new DescribeTargetGroupsCommand({ TargetGroupArns: [arn], ...(marker ? { Marker: marker } : {}) }),
        deadline(),
      ),
    (p) => p.TargetGroups?.find((g) => g.TargetGroupArn === arn),
    "TargetGroupNotFound",
  );
}

/** The classic ELB, across DescribeLoadBalancers' pages. */
function classicLoadBalancer(
  client: ElasticLoadBalancingClient,
  name: string,
  deadline: () => { abortSignal: AbortSignal },
): Promise<LoadBalancerDescription> {
  const { DescribeLoadBalancersCommand } = elbClassicSdk();
  return findPaged(
    (marker) =>
      client.send(
        new DescribeLoadBalancersCommand({ LoadBalancerNames: [name], ...(marker ? { Marker: marker } : {}) }),
        deadline(),
      ),
    (p) => p.LoadBalancerDescriptions?.find((d) => d.LoadBalancerName === name),
    "LoadBalancerNotFound",
  );
}

function isInvalidInstance(e: unknown): boolean {
  const err = e as { name?: string; Code?: string };
  return (err.Code ?? err.name) === "InvalidInstance" || err.name === "InvalidEndPointException";
}

function seconds(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && Number.isInteger(n) && n >= 0 ? n : fallback;
}

/** A value per key, kept for `ttlMs`; a failed read is not kept. */
function memo(ttlMs: number) {
  const kept = new Map<string, { at: number; value: Promise<LbTiming> }>();
  return (key: string, read: () => Promise<LbTiming>): Promise<LbTiming> => {
    const hit = kept.get(key);
    if (hit && Date.now() - hit.at < ttlMs) return hit.value;
    const value = read();
    kept.set(key, { at: Date.now(), value });
    value.catch(() => kept.delete(key));
    return value;
  };
}
