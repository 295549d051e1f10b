// The AWS API load balancer beyond molt's own nodes: adopted nodes' registrations (declared when
// they are recorded, so their retirement deregisters them) and the load balancer as AWS
// describes it, for adoption's endpoint check (infra/providers/api-load-balancer.ts).
import * as pulumi from "@pulumi/pulumi";
import type { NodeEntry } from "../../../orchestrator/core/nodes";
import type { LoadBalancerFacts } from "../api-load-balancer";
import { awsSdk } from "../sdk";
import type { AwsNodeSettings } from "./config";
import { apiAttachment } from "./node";

const EC2_INSTANCE = /^i-[0-9a-f]{8}([0-9a-f]{9})?$/;
const AWS_PROVIDER_ID = /^aws:\/\/\/[^/]*\/(i-[0-9a-f]{8}(?:[0-9a-f]{9})?)$/;

/** An adopted node's EC2 instance: from its provider id (aws:///ZONE/ID), else its imported machine's id. */
export function adoptedInstanceId(entry: NodeEntry): string | undefined {
  const a = entry.adopted;
  const fromProviderId = a?.providerId ? AWS_PROVIDER_ID.exec(a.providerId)?.[1] : undefined;
  if (fromProviderId) return fromProviderId;
  return a?.machine && EC2_INSTANCE.test(a.machine.importId) ? a.machine.importId : undefined;
}

/** Declares an adopted node's registration; it is already registered, so creating it changes nothing. */
export function adoptedAttachment(
  entry: NodeEntry,
  s: AwsNodeSettings,
  machine?: pulumi.Resource,
): pulumi.Resource | undefined {
  const id = adoptedInstanceId(entry);
  if (!id) return undefined;
  return apiAttachment(`${entry.name}-api`, s.loadBalancer, id, s.region, machine ? { dependsOn: [machine] } : {});
}

export function adoptedRelease(entry: NodeEntry, s: AwsNodeSettings): string {
  const lb = s.loadBalancer;
  const named = "classicElb" in lb ? `classic ELB ${String(lb.classicElb)}` : "the API target group";
  return adoptedInstanceId(entry)
    ? `deregistered from ${named}`
    : `left registered in ${named}: molt did not record its instance when it was adopted; deregister it yourself`;
}

/** The load balancer as AWS describes it: DNS names, and (classic ELB) which adopted instances it holds. */
export function apiLoadBalancer(s: AwsNodeSettings, adopted: readonly NodeEntry[]): pulumi.Output<LoadBalancerFacts> {
  const sdk = awsSdk();
  const region = s.region ? { region: s.region } : {};
  const lb = s.loadBalancer;
  if ("classicElb" in lb)
    return pulumi.output(lb.classicElb).apply(async (name): Promise<LoadBalancerFacts> => {
      const elb = await sdk.elb.getLoadBalancer({ name, ...region });
      const members: Record<string, boolean> = {};
      for (const n of adopted) {
        const id = adoptedInstanceId(n);
        if (id) members[n.name] = (elb.instances ?? []).includes(id);
      }
      return { name: `classic ELB ${name}`, dnsNames: elb.dnsName ? [elb.dnsName] : [], addresses: [], members };
    });
  return pulumi.output(lb.targetGroupArn).apply(async (arn): Promise<LoadBalancerFacts> => {
    const tg = await sdk.lb.getTargetGroup({ arn, ...region });
    const lbs = await Promise.all(
      (tg.loadBalancerArns ?? []).map((a) => sdk.lb.getLoadBalancer({ arn: a, ...region })),
    );
    const names = lbs.map((l) => l.name).join(", ");
    return {
      name: `target group ${tg.name} (${names ? `load balancer ${names}` : "of no load balancer"})`,
      dnsNames: lbs.map((l) => l.dnsName).filter((d) => !!d),
      addresses: [],
      // An NLB's describe does not list its targets (DescribeTargetHealth is no invoke).
      members: {},
    };
  });
}
