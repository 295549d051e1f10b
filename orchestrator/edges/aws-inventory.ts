// The AWS side of leaked-machine detection (core/leaks.ts): the cluster's control-plane
// instances as EC2 lists them under the tags every molt node carries
// (infra/providers/cloud-common.ts nodeTags), and their termination.
import type { Instance } from "@aws-sdk/client-ec2";
import type { MachineInventory } from "../core/edges";
import { terminateEach, type CloudMachine } from "../core/leaks";
import { awsCall, awsClientConfig, CALL_MS, type AwsClientSettings } from "./aws-client";
import { ec2Sdk } from "./aws-sdks";

export type AwsInventorySettings = AwsClientSettings & { clusterName: string };

export function awsInventory(s: AwsInventorySettings): MachineInventory {
  const { EC2Client, DescribeInstancesCommand, TerminateInstancesCommand } = ec2Sdk();
  const client = new EC2Client(awsClientConfig(s));
  const call = <T>(action: string, send: () => Promise<T>) => awsCall(action, `aws ${s.region}`, send);
  return {
    where: `aws ${s.region}`,
    resourceType: "aws:ec2/instance:Instance",
    async list() {
      const machines: CloudMachine[] = [];
      const deadline = AbortSignal.timeout(CALL_MS);
      let token: string | undefined;
      do {
        const page = await call("ec2:DescribeInstances", () =>
          client.send(
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
          ),
        );
        for (const r of page.Reservations ?? []) for (const i of r.Instances ?? []) machines.push(machineOf(i));
        token = page.NextToken || undefined;
      } while (token);
      return machines;
    },
    // One call per instance: EC2 refuses a whole call for one bad id (terminating none), and
    // one protected instance must not keep the others; the error says which were terminated.
    async terminate(ids) {
      await terminateEach(`aws ${s.region}`, ids, (id) =>
        call("ec2:TerminateInstances", () =>
          client.send(new TerminateInstancesCommand({ InstanceIds: [id] }), {
            abortSignal: AbortSignal.timeout(CALL_MS),
          }),
        ).then(() => undefined),
      );
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
