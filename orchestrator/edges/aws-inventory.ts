// The AWS side of leaked-machine detection (core/leaks.ts): the cluster's control-plane
// instances as EC2 lists them under the tags every molt node carries
// (infra/providers/cloud-common.ts nodeTags), and their termination.
import {
  EC2Client,
  DescribeInstancesCommand,
  TerminateInstancesCommand,
  type EC2ClientConfig,
  type Instance,
} from "@aws-sdk/client-ec2";
import type { MachineInventory } from "../core/edges";
import type { CloudMachine } from "../core/leaks";

/** Each call's whole deadline, retries included: an EC2 endpoint that stops answering must not hold the run. */
const CALL_MS = 20_000;
const CONNECT_MS = 5_000;
const ATTEMPT_MS = 8_000;

export interface AwsInventorySettings {
  region: string;
  clusterName: string;
  /** Another EC2 endpoint (tests; VPC interface endpoints). */
  endpoint?: string;
  env?: Record<string, string | undefined>;
}

export function awsInventory(s: AwsInventorySettings): MachineInventory {
  const env = s.env ?? process.env;
  const config: EC2ClientConfig = {
    region: s.region,
    maxAttempts: 3,
    requestHandler: { connectionTimeout: CONNECT_MS, requestTimeout: ATTEMPT_MS, throwOnRequestTimeout: true },
    ...(env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
      ? {
          credentials: {
            accessKeyId: env.AWS_ACCESS_KEY_ID,
            secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
            ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
          },
        }
      : {}),
    ...(s.endpoint ? { endpoint: s.endpoint } : {}),
  };
  const client = new EC2Client(config);
  return {
    where: `aws ${s.region}`,
    resourceType: "aws:ec2/instance:Instance",
    async list() {
      const machines: CloudMachine[] = [];
      const deadline = AbortSignal.timeout(CALL_MS);
      let token: string | undefined;
      do {
        const page = await client.send(
          new DescribeInstancesCommand({
            Filters: [
              { Name: "tag:molt.io/cluster", Values: [s.clusterName] },
              { Name: "tag:molt.io/role", Values: ["control-plane"] },
              { Name: "instance-state-name", Values: ["pending", "running", "stopping", "stopped"] },
            ],
            MaxResults: 100,
            ...(token ? { NextToken: token } : {}),
          }),
          { abortSignal: deadline },
        );
        for (const r of page.Reservations ?? []) for (const i of r.Instances ?? []) machines.push(machineOf(i));
        token = page.NextToken || undefined;
      } while (token);
      return machines;
    },
    async terminate(ids) {
      if (ids.length === 0) return;
      await client.send(new TerminateInstancesCommand({ InstanceIds: [...ids] }), {
        abortSignal: AbortSignal.timeout(CALL_MS),
      });
    },
  };
}

function machineOf(i: Instance): CloudMachine {
  const node = i.Tags?.find((t) => t.Key === "molt.io/node")?.Value;
  return {
    id: i.InstanceId ?? "",
    state: i.State?.Name ?? "unknown",
    ...(node ? { node } : {}),
    ...(i.PrivateIpAddress ? { address: i.PrivateIpAddress } : {}),
    ...(i.LaunchTime ? { launchedAt: i.LaunchTime.toISOString() } : {}),
  };
}
