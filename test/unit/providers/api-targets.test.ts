// Retirement behind a cloud's API load balancer: deregister-target (orchestrator/act/endpoint.ts)
// over the AWS target group, the classic ELB (infra/providers/aws/api-targets.ts) and the Azure
// backend pool (infra/providers/azure/api-targets.ts), each against a fake of the cloud's API
// that drains the way the cloud does (a deregistration delay, connection draining, an ARM PUT
// being applied). The act must deregister, then wait until the load balancer reports the node
// unused, and give up (registering it again, removing nothing) when it does not.
import * as assert from "node:assert/strict";
import { deregisterTarget, registerTarget } from "../../../orchestrator/act/endpoint";
import type { ActContext } from "../../../orchestrator/act/context";
import type { LoadBalancerEdge } from "../../../orchestrator/core/edges";
import type { NodeEndpoint, World } from "../../../orchestrator/core/model";
import { AwsApiTargets, classicState, targetGroupState, type ElbApi } from "../../../infra/providers/aws/api-targets";
import { AzureApiTargets, withPool, type ArmWithPost } from "../../../infra/providers/azure/api-targets";
import { configurationsInPool, type ArmResource } from "../../../infra/providers/azure/pool-membership-impl";

const ARN = "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/kubeone-api/0123456789abcdef";
const endpoint = (name: string, providerId: string): NodeEndpoint => ({
  name,
  privateAddress: "10.0.1.15",
  sshHost: "10.0.1.15",
  sshPort: 22,
  hostPublicKey: "ssh-ed25519 AAAA",
  providerId,
});
const OLD = endpoint("prod-cp-1", "aws:///eu-central-1a/i-0aaaaaaaaaaaaaaa1");
const NEW = endpoint("prod-cp-4", "aws:///eu-central-1b/i-0bbbbbbbbbbbbbbb4");

/** An ActContext over `lb`, the world as the planner saw it (its observation, so its drain estimate). */
async function contextFor(lb: LoadBalancerEdge, nodes: NodeEndpoint[], settleSeconds = 5): Promise<ActContext> {
  const world = {
    nodes: [],
    endpoints: nodes,
    orphans: [],
    expired: [],
    lb: await lb.observe(nodes),
  } as unknown as World;
  return {
    edges: { lb } as ActContext["edges"],
    world,
    intent: { timeouts: { joinSeconds: 60, settleSeconds, drainSeconds: 60 } } as ActContext["intent"],
    pollMs: 1,
    timed: (_p, _o, _n, fn) => fn(),
    report: () => undefined,
  };
}

/**
 * Elastic Load Balancing as a state machine: a deregistered target drains for `drainReads`
 * reads of its health (the deregistration delay), then is unused; a classic ELB instance stays
 * InService "deregistration currently in progress" as long, then is no longer held.
 */
function fakeElb(o: { drainReads: number; classic?: boolean }) {
  const calls: string[] = [];
  const registered = new Map<string, number | "in">([
    ["i-0aaaaaaaaaaaaaaa1", "in"],
    ["i-0bbbbbbbbbbbbbbb4", "in"],
  ]);
  const read = (id: string) => {
    const r = registered.get(id);
    if (typeof r === "number") registered.set(id, r - 1);
    return r;
  };
  const api: ElbApi = {
    async describeTargetHealth(arn, ids) {
      calls.push(`describeTargetHealth ${arn === ARN}`);
      return ids.flatMap((id) => {
        const r = read(id);
        if (r === undefined) return [{ id, state: "unused", reason: "Target.NotRegistered" }];
        if (r === "in") return [{ id, state: "healthy" }];
        if (r <= 0) return (registered.delete(id), [{ id, state: "unused", reason: "Target.NotRegistered" }]);
        return [{ id, state: "draining", reason: "Target.DeregistrationInProgress" }];
      });
    },
    async deregisterTargets(_arn, ids) {
      calls.push(`deregisterTargets ${ids.join(",")}`);
      for (const id of ids) if (registered.get(id) === "in") registered.set(id, o.drainReads);
    },
    async registerTargets(_arn, ids) {
      calls.push(`registerTargets ${ids.join(",")}`);
      for (const id of ids) registered.set(id, "in");
    },
    targetGroupTiming: async () => ({ drainSeconds: 300, intervalSeconds: 30, unhealthyThreshold: 2 }),
    async describeInstanceHealth(name, ids) {
      calls.push(`describeInstanceHealth ${name}`);
      return ids.flatMap((id) => {
        const r = read(id);
        if (r === undefined) return [];
        if (r === "in") return [{ id, state: "InService", reasonCode: "N/A", description: "N/A" }];
        if (r <= 0) return (registered.delete(id), []);
        return [
          { id, state: "InService", reasonCode: "N/A", description: "Instance deregistration currently in progress." },
        ];
      });
    },
    async deregisterInstances(_name, ids) {
      calls.push(`deregisterInstances ${ids.join(",")}`);
      for (const id of ids) if (registered.get(id) === "in") registered.set(id, o.drainReads);
    },
    async registerInstances(_name, ids) {
      calls.push(`registerInstances ${ids.join(",")}`);
      for (const id of ids) registered.set(id, "in");
    },
    classicTiming: async () => ({ drainSeconds: 300, intervalSeconds: 30, unhealthyThreshold: 2 }),
  };
  return { api, calls, registered };
}

describe("retirement behind a cloud's API load balancer (deregister-target)", () => {
  for (const classic of [false, true]) {
    const kind = classic ? "classic ELB" : "NLB target group";
    const lbOf = (api: ElbApi) =>
      new AwsApiTargets(classic ? { classicElb: "kubeone-api-lb" } : { targetGroupArn: ARN }, api);

    it(`${kind}: deregisters the instance and waits until AWS reports it drained`, async () => {
      const elb = fakeElb({ drainReads: 3, classic });
      const lb = lbOf(elb.api);
      const ctx = await contextFor(lb, [OLD, NEW]);
      assert.equal(ctx.world.lb!.drainSeconds, 360, "deregistration delay (connection draining) + 30 s x 2");
      assert.deepEqual(
        ctx.world.lb!.targets["prod-cp-1"],
        classic ? { state: "healthy", detail: "N/A" } : { state: "healthy" },
      );
      elb.calls.length = 0;
      const outcome = await deregisterTarget({ kind: "deregister-target", node: "prod-cp-1", reason: "retire" }, ctx);
      assert.deepEqual(outcome, { kind: "done" });
      const describe = classic ? "describeInstanceHealth kubeone-api-lb" : "describeTargetHealth true";
      assert.deepEqual(elb.calls, [
        `${classic ? "deregisterInstances" : "deregisterTargets"} i-0aaaaaaaaaaaaaaa1`,
        // Draining for the delay (three reads), then unused: only then is the act done.
        describe,
        describe,
        describe,
        describe,
      ]);
      assert.deepEqual((await lb.observe([OLD])).targets["prod-cp-1"], {
        state: "unused",
        detail: classic ? "not registered" : "Target.NotRegistered",
      });
      // The new node was never touched.
      assert.equal(elb.registered.get("i-0bbbbbbbbbbbbbbb4"), "in");
    });

    it(`${kind}: a drain that outlasts its deadline puts the node back and removes nothing`, async () => {
      const elb = fakeElb({ drainReads: Number.MAX_SAFE_INTEGER, classic });
      const lb = lbOf(elb.api);
      const ctx = await contextFor(lb, [OLD, NEW], 1);
      ctx.world.lb!.drainSeconds = 0;
      const outcome = await deregisterTarget({ kind: "deregister-target", node: "prod-cp-1", reason: "retire" }, ctx);
      assert.equal(outcome.kind, "stop");
      assert.match(
        outcome.kind === "stop" ? outcome.reason : "",
        /did not drain prod-cp-1 within 1s .*last seen: draining.*prod-cp-1 was registered again and nothing was removed/,
      );
      assert.equal(elb.registered.get("i-0aaaaaaaaaaaaaaa1"), "in");
    });
  }

  it("AWS's states in molt's words", () => {
    assert.deepEqual(targetGroupState({ state: "unavailable", reason: "Target.HealthCheckDisabled" }), {
      state: "unhealthy",
      detail: "Target.HealthCheckDisabled",
    });
    assert.deepEqual(targetGroupState({ state: "initial", reason: "Elb.RegistrationInProgress" }), {
      state: "initial",
      detail: "Elb.RegistrationInProgress",
    });
    assert.match(String((targetGroupState({ state: "bogus" }) as { error: string }).error), /bogus/);
    assert.equal(
      (
        classicState({
          state: "OutOfService",
          reasonCode: "ELB",
          description: "Instance registration is still in progress.",
        }) as { state: string }
      ).state,
      "initial",
    );
    assert.equal(
      (
        classicState({
          state: "OutOfService",
          reasonCode: "Instance",
          description: "Instance has failed at least the UnhealthyThreshold number of health checks consecutively.",
        }) as { state: string }
      ).state,
      "unhealthy",
    );
    assert.deepEqual(classicState(undefined), { state: "unused", detail: "not registered" });
  });

  it("a classic ELB's deregistered instance is unused: AWS answers OutOfService, not registered", () => {
    // DescribeInstanceHealth names an instance that was registered and is no more (the end of a
    // deregistration, connection draining over) OutOfService with this description; the SDK's own
    // InstanceDeregistered waiter waits for exactly that.
    assert.deepEqual(
      classicState({
        state: "OutOfService",
        reasonCode: "ELB",
        description: "Instance is not currently registered with the LoadBalancer.",
      }),
      { state: "unused", detail: "Instance is not currently registered with the LoadBalancer." },
    );
    assert.equal(
      (
        classicState({
          state: "Unknown",
          description: "Instance is not currently registered with the LoadBalancer.",
        }) as {
          state: string;
        }
      ).state,
      "unused",
    );
  });

  it("a node without an instance id is unobserved, never deregistered blind", async () => {
    const elb = fakeElb({ drainReads: 1 });
    const lb = new AwsApiTargets({ targetGroupArn: ARN }, elb.api);
    const odd = endpoint("prod-cp-9", "lab://t1/prod-cp-9");
    assert.match(
      String(((await lb.observe([odd])).targets["prod-cp-9"] as { error: string }).error),
      /no EC2 instance id/,
    );
    await assert.rejects(lb.deregister(odd), /no EC2 instance id/);
    assert.ok(!elb.calls.some((c) => c.startsWith("deregister")));
  });

  describe("Azure backend pool", () => {
    const rg = "/subscriptions/s1/resourceGroups/prod/providers";
    const LB = `${rg}/Microsoft.Network/loadBalancers/kubernetes`;
    const POOL = `${LB}/backendAddressPools/ApiServers`;
    const RULE = `${LB}/loadBalancingRules/api`;
    const VM = `${rg}/Microsoft.Compute/virtualMachines/prod-cp-1`;
    const NIC = `${rg}/Microsoft.Network/networkInterfaces/prod-cp-1`;
    const node = endpoint("prod-cp-1", `azure://${VM}`);
    const nic = (pools: string[], state = "Succeeded"): ArmResource => ({
      id: NIC,
      etag: 'W/"1"',
      properties: {
        provisioningState: state,
        ipConfigurations: [
          {
            name: "ipconfig1",
            properties: { primary: true, loadBalancerBackendAddressPools: pools.map((id) => ({ id })) },
          },
        ],
      },
    });

    /** ARM: a NIC PUT is applied over `applyReads` reads (provisioning Updating), the rule health follows the pool. */
    function fakeArm(applyReads: number) {
      let current = nic([POOL]);
      let updating = 0;
      const calls: string[] = [];
      const arm: ArmWithPost = {
        async get(id) {
          if (id === VM) return { id: VM, properties: { networkProfile: { networkInterfaces: [{ id: NIC }] } } };
          if (id === LB)
            return {
              id: LB,
              name: "kubernetes",
              properties: {
                loadBalancingRules: [
                  {
                    id: RULE,
                    name: "api",
                    properties: {
                      frontendPort: 6443,
                      backendAddressPool: { id: POOL },
                      probe: { id: `${LB}/probes/api` },
                    },
                  },
                ],
                probes: [{ id: `${LB}/probes/api`, properties: { intervalInSeconds: 5, probeThreshold: 2 } }],
              },
            };
          if (id !== NIC) return undefined;
          if (updating > 0)
            return (updating--, { ...current, properties: { ...current.properties, provisioningState: "Updating" } });
          return current;
        },
        async put(id, _v, body, etag) {
          calls.push(`put ${id === NIC} ${etag}`);
          current = { ...body, properties: { ...body.properties, provisioningState: "Succeeded" } };
          updating = applyReads;
        },
        async post(id) {
          calls.push(`post ${id}`);
          const inPool = configurationsInPool(current, POOL).length > 0;
          return {
            up: inPool ? 1 : 0,
            down: 0,
            loadBalancerBackendAddresses: inPool
              ? [
                  {
                    networkInterfaceIPConfigurationId: `${NIC}/ipConfigurations/ipconfig1`,
                    state: "Up",
                    reason: "Up_Probe_Success",
                  },
                ]
              : [],
          };
        },
      };
      return { arm, calls, current: () => current };
    }

    it("takes the NIC out of the pool and waits until Azure has applied it", async () => {
      const azure = fakeArm(2);
      const lb = new AzureApiTargets(POOL, azure.arm, { deadlineMs: 5_000, pollMs: 1 });
      const ctx = await contextFor(lb, [node]);
      assert.deepEqual(ctx.world.lb!.targets["prod-cp-1"], { state: "healthy", detail: "Up_Probe_Success" });
      assert.equal(ctx.world.lb!.drainSeconds, 10, "the probe's interval x threshold");
      assert.equal(ctx.world.lb!.name, "backend pool ApiServers of kubernetes");
      const outcome = await deregisterTarget({ kind: "deregister-target", node: "prod-cp-1", reason: "retire" }, ctx);
      assert.deepEqual(outcome, { kind: "done" });
      assert.deepEqual(configurationsInPool(azure.current(), POOL), []);
      assert.ok(azure.calls.includes('put true W/"1"'), "a conditional PUT of the NIC");
      assert.deepEqual((await lb.observe([node])).targets["prod-cp-1"], { state: "unused" });
      // register-target puts it back (a retirement that did not finish).
      await registerTarget({ kind: "register-target", node: "prod-cp-1", reason: "stays" }, ctx);
      assert.deepEqual(configurationsInPool(azure.current(), POOL), ["ipconfig1"]);
    });

    it("a NIC back in the pool is initial until the probe calls it Up", async () => {
      const azure = fakeArm(1);
      const lb = new AzureApiTargets(POOL, azure.arm, { deadlineMs: 5_000, pollMs: 1 });
      await azure.arm.put(NIC, "", withPool(nic([]), POOL), 'W/"1"');
      assert.deepEqual((await lb.observe([node])).targets["prod-cp-1"], {
        state: "initial",
        detail: "Azure is applying it",
      });
    });
  });
});
