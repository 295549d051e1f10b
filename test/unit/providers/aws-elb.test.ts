// Retirement behind an AWS load balancer over the real SDK clients (orchestrator/edges/aws-elb.ts)
// against a local server that speaks Elastic Load Balancing's query protocol, ELBv2 (2015-12-01)
// for target groups and the classic API (2012-06-01), as AWS documents them: form-encoded POSTs
// (Action=..., list members as Name.member.N), XML answers, errors as <ErrorResponse>. No AWS
// API is reachable from here; what these tests hold is what molt sends and how it reads AWS's
// answers, including the deregistration's wait (orchestrator/act/endpoint.ts) end to end.
import * as assert from "node:assert/strict";
import { AwsQueryServer, type QueryRequest } from "../../support/aws-query-server";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { deregisterTarget } from "../../../orchestrator/act/endpoint";
import type { ActContext } from "../../../orchestrator/act/context";
import type { LoadBalancerEdge } from "../../../orchestrator/core/edges";
import type { NodeEndpoint, World } from "../../../orchestrator/core/model";
import { AwsApiTargets } from "../../../infra/providers/aws/api-targets";
import { awsElbApi } from "../../../orchestrator/edges/aws-elb";
import { loadBalancerEdgeFor, loadBalancerGap } from "../../../orchestrator/edges/open";
import { loadStackConfig, stackConfigPath } from "../../../orchestrator/config";

const V2 = "2015-12-01";
const CLASSIC = "2012-06-01";
const V2_ACTIONS = [
  "DescribeTargetGroups",
  "DescribeTargetGroupAttributes",
  "DescribeTargetHealth",
  "DeregisterTargets",
  "RegisterTargets",
];
const CLASSIC_ACTIONS = [
  "DescribeLoadBalancers",
  "DescribeLoadBalancerAttributes",
  "DescribeInstanceHealth",
  "DeregisterInstancesFromLoadBalancer",
  "RegisterInstancesWithLoadBalancer",
];
const ARN = "arn:aws:elasticloadbalancing:eu-central-1:123456789012:targetgroup/prod-api/0123456789abcdef";
const ELB = "prod-api-lb";
const SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const env = { AWS_ACCESS_KEY_ID: "AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY: SECRET };

const NOT_REGISTERED = "Instance is not currently registered with the LoadBalancer.";
const DEREGISTERING = "Instance deregistration currently in progress.";

interface Target {
  state: string;
  reason?: string;
  description?: string;
  /** Reads of its health left before a deregistration is over. */
  drainReads?: number;
}

/**
 * Elastic Load Balancing as a state machine behind its query API: a deregistered target drains
 * for `drainReads` reads of its health, then is unused (target group) or no longer registered
 * (classic ELB); an instance id EC2 does not know is InvalidInstance to the classic API.
 */
class FakeElb {
  /** Actions answered AccessDenied. */
  readonly denied = new Set<string>();
  readonly targets = new Map<string, Target>();
  readonly instances = new Map<string, Target>();
  /** EC2 instances that exist (the classic API knows them even when not registered). */
  readonly ec2 = new Set<string>();
  deregistrationDelay = "120";
  drainReads = 2;
  draining: { enabled: boolean; timeout: number } = { enabled: true, timeout: 60 };
  readonly http = new AwsQueryServer({
    handlers: Object.fromEntries([
      ...V2_ACTIONS.map((a) => [`${V2} ${a}`, (r: QueryRequest) => response(a, V2, this.v2(r.params)!)]),
      ...CLASSIC_ACTIONS.map((a) => [
        `${CLASSIC} ${a}`,
        (r: QueryRequest) => response(a, CLASSIC, this.classic(r.params)!),
      ]),
    ]),
    error,
    unsigned: { status: 403, code: "MissingAuthenticationToken" },
    refuse: ({ params: p }) =>
      this.denied.has(p.Action)
        ? {
            status: 403,
            code: "AccessDenied",
            message:
              `User: arn:aws:iam::123456789012:user/molt is not authorized to perform: ` +
              `elasticloadbalancing:${p.Action} on resource: ${p.TargetGroupArn ?? p.LoadBalancerName} ` +
              "because no identity-based policy allows the action",
          }
        : undefined,
  });

  actions(): string[] {
    return this.http.requests.map((r) => r.Action);
  }

  private v2(p: Record<string, string>): string | undefined {
    if (p.Action !== "DescribeTargetGroups" && p.TargetGroupArn !== ARN)
      throw { code: "TargetGroupNotFound", message: `Target groups '${p.TargetGroupArn}' not found` };
    switch (p.Action) {
      case "DescribeTargetGroups": {
        // Two pages: AWS may answer a page without the group and a NextMarker.
        if (p["TargetGroupArns.member.1"] !== ARN) throw { code: "TargetGroupNotFound", message: "not found" };
        if (!p.Marker) return "<TargetGroups/><NextMarker>page-2</NextMarker>";
        return (
          `<TargetGroups><member><TargetGroupArn>${ARN}</TargetGroupArn><TargetGroupName>prod-api</TargetGroupName>` +
          "<Protocol>TCP</Protocol><Port>6443</Port><TargetType>instance</TargetType>" +
          "<HealthCheckIntervalSeconds>10</HealthCheckIntervalSeconds>" +
          "<HealthyThresholdCount>3</HealthyThresholdCount>" +
          "<UnhealthyThresholdCount>3</UnhealthyThresholdCount></member></TargetGroups>"
        );
      }
      case "DescribeTargetGroupAttributes":
        return (
          "<Attributes>" +
          `<member><Key>deregistration_delay.timeout_seconds</Key><Value>${this.deregistrationDelay}</Value></member>` +
          "<member><Key>preserve_client_ip.enabled</Key><Value>false</Value></member></Attributes>"
        );
      case "DescribeTargetHealth": {
        const members = listOf(p, "Targets", "Id").map((id, i) => {
          assert.equal(p[`Targets.member.${i + 1}.Port`], "6443", "targets are asked on the API port");
          const t = this.read(this.targets, id) ?? { state: "unused", reason: "Target.NotRegistered" };
          return (
            `<member><Target><Id>${id}</Id><Port>6443</Port></Target><HealthCheckPort>6443</HealthCheckPort>` +
            `<TargetHealth><State>${t.state}</State>${t.reason ? `<Reason>${t.reason}</Reason>` : ""}` +
            `${t.description ? `<Description>${t.description}</Description>` : ""}</TargetHealth></member>`
          );
        });
        return `<TargetHealthDescriptions>${members.join("")}</TargetHealthDescriptions>`;
      }
      case "DeregisterTargets":
        for (const id of listOf(p, "Targets", "Id")) {
          assert.equal(p["Targets.member.1.Port"], "6443");
          const t = this.targets.get(id);
          if (t && t.state !== "draining")
            this.targets.set(id, {
              state: "draining",
              reason: "Target.DeregistrationInProgress",
              drainReads: this.drainReads,
            });
        }
        return "";
      case "RegisterTargets":
        for (const id of listOf(p, "Targets", "Id")) this.targets.set(id, { state: "initial" });
        return "";
    }
    return undefined;
  }

  private classic(p: Record<string, string>): string | undefined {
    if (p.LoadBalancerName !== ELB && p["LoadBalancerNames.member.1"] !== ELB)
      throw { code: "LoadBalancerNotFound", message: `There is no ACTIVE Load Balancer named '${p.LoadBalancerName}'` };
    switch (p.Action) {
      case "DescribeLoadBalancers":
        if (!p.Marker) return "<LoadBalancerDescriptions/><NextMarker>page-2</NextMarker>";
        return (
          `<LoadBalancerDescriptions><member><LoadBalancerName>${ELB}</LoadBalancerName>` +
          "<HealthCheck><Target>SSL:6443</Target><Interval>10</Interval><Timeout>5</Timeout>" +
          "<UnhealthyThreshold>2</UnhealthyThreshold><HealthyThreshold>2</HealthyThreshold></HealthCheck>" +
          "</member></LoadBalancerDescriptions>"
        );
      case "DescribeLoadBalancerAttributes":
        return (
          "<LoadBalancerAttributes><ConnectionDraining>" +
          `<Enabled>${this.draining.enabled}</Enabled><Timeout>${this.draining.timeout}</Timeout>` +
          "</ConnectionDraining><CrossZoneLoadBalancing><Enabled>true</Enabled></CrossZoneLoadBalancing>" +
          "</LoadBalancerAttributes>"
        );
      case "DescribeInstanceHealth": {
        const ids = listOf(p, "Instances", "InstanceId");
        const unknown = ids.find((id) => !this.ec2.has(id));
        if (unknown) throw { code: "InvalidInstance", message: `Could not find EC2 instance ${unknown}.` };
        const members = ids.map((id) => {
          const t = this.read(this.instances, id) ?? {
            state: "OutOfService",
            reason: "ELB",
            description: NOT_REGISTERED,
          };
          return (
            `<member><InstanceId>${id}</InstanceId><State>${t.state}</State>` +
            `<ReasonCode>${t.reason ?? "N/A"}</ReasonCode><Description>${t.description ?? "N/A"}</Description></member>`
          );
        });
        return `<InstanceStates>${members.join("")}</InstanceStates>`;
      }
      case "DeregisterInstancesFromLoadBalancer":
        for (const id of listOf(p, "Instances", "InstanceId"))
          if (this.instances.has(id))
            this.instances.set(id, { state: "InService", description: DEREGISTERING, drainReads: this.drainReads });
        return this.registered();
      case "RegisterInstancesWithLoadBalancer":
        for (const id of listOf(p, "Instances", "InstanceId"))
          this.instances.set(id, {
            state: "OutOfService",
            reason: "ELB",
            description: "Instance registration is still in progress.",
          });
        return this.registered();
    }
    return undefined;
  }

  private registered(): string {
    const ids = [...this.instances].filter(([, t]) => t.description !== DEREGISTERING).map(([id]) => id);
    return `<Instances>${ids.map((id) => `<member><InstanceId>${id}</InstanceId></member>`).join("")}</Instances>`;
  }

  /** A health read: a draining target counts down, then is gone. */
  private read(m: Map<string, Target>, id: string): Target | undefined {
    const t = m.get(id);
    if (t?.drainReads === undefined) return t;
    if (t.drainReads <= 0) return (m.delete(id), undefined);
    t.drainReads--;
    return t;
  }
}

function listOf(p: Record<string, string>, list: string, field: string): string[] {
  const out: string[] = [];
  for (let i = 1; p[`${list}.member.${i}.${field}`] !== undefined; i++) out.push(p[`${list}.member.${i}.${field}`]);
  return out;
}

function response(action: string, version: string, result: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>` +
    `<${action}Response xmlns="http://elasticloadbalancing.amazonaws.com/doc/${version}/">` +
    `<${action}Result>${result}</${action}Result>` +
    `<ResponseMetadata><RequestId>0e6b5a3d-1111-2222-3333-444455556666</RequestId></ResponseMetadata>` +
    `</${action}Response>`
  );
}

function error(code: string, message: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?><ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/${V2}/">` +
    `<Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error>` +
    `<RequestId>0e6b5a3d-aaaa-bbbb-cccc-ddddeeeeffff</RequestId></ErrorResponse>`
  );
}

const node = (name: string, id: string, zone = "eu-central-1a"): NodeEndpoint => ({
  name,
  privateAddress: "10.0.1.15",
  sshHost: "10.0.1.15",
  sshPort: 22,
  hostPublicKey: "ssh-ed25519 AAAA",
  providerId: `aws:///${zone}/${id}`,
});
const I = {
  old: "i-0aaaaaaaaaaaaaaa1",
  stays: "i-0bbbbbbbbbbbbbbb2",
  sick: "i-0ccccccccccccccc3",
  fresh: "i-0ddddddddddddddd4",
  gone: "i-0eeeeeeeeeeeeeee5",
};
const OLD = node("prod-cp-1", I.old);
const STAYS = node("prod-cp-2", I.stays);
const SICK = node("prod-cp-3", I.sick);
const FRESH = node("prod-cp-4", I.fresh, "eu-central-1b");
const GONE = node("prod-cp-5", I.gone);

/** The deregister-target act over `lb` with the world the planner saw (orchestrator/act/endpoint.ts). */
async function deregister(lb: LoadBalancerEdge, nodes: NodeEndpoint[], settleSeconds = 5) {
  const world = { nodes: [], endpoints: nodes, orphans: [], expired: [], lb: await lb.observe(nodes) };
  const ctx = {
    edges: { lb },
    world: world as unknown as World,
    intent: { timeouts: { joinSeconds: 60, settleSeconds, drainSeconds: 60 } },
    pollMs: 1,
    timed: (_p: string, _o: string, _n: string, fn: () => Promise<unknown>) => fn(),
    report: () => undefined,
  } as unknown as ActContext;
  return deregisterTarget({ kind: "deregister-target", node: nodes[0].name } as never, ctx);
}

describe("AWS load balancer over Elastic Load Balancing's query API (orchestrator/edges/aws-elb.ts)", () => {
  let elb: FakeElb;
  let endpoint: string;
  beforeEach(async () => {
    elb = new FakeElb();
    endpoint = await elb.http.start();
  });
  afterEach(() => elb.http.close());
  const api = () => awsElbApi({ region: "eu-central-1", endpoint, env });

  describe("NLB target group (ELBv2)", () => {
    const lb = () => new AwsApiTargets({ targetGroupArn: ARN }, api());
    beforeEach(() => {
      elb.targets.set(I.old, { state: "healthy" });
      elb.targets.set(I.stays, { state: "draining", reason: "Target.DeregistrationInProgress" });
      elb.targets.set(I.sick, {
        state: "unhealthy",
        reason: "Target.FailedHealthChecks",
        description: "Health checks failed",
      });
      elb.targets.set(I.fresh, { state: "initial", reason: "Elb.RegistrationInProgress" });
    });

    it("asks for each node's instance on port 6443 and reads AWS's states", async () => {
      const o = await lb().observe([OLD, STAYS, SICK, FRESH, GONE]);
      assert.deepEqual(o.targets, {
        "prod-cp-1": { state: "healthy" },
        "prod-cp-2": { state: "draining", detail: "Target.DeregistrationInProgress" },
        "prod-cp-3": { state: "unhealthy", detail: "Target.FailedHealthChecks: Health checks failed" },
        "prod-cp-4": { state: "initial", detail: "Elb.RegistrationInProgress" },
        "prod-cp-5": { state: "unused", detail: "Target.NotRegistered" },
      });
      assert.equal(o.name, `target group ${ARN}`);
      const health = elb.http.requests.find((r) => r.Action === "DescribeTargetHealth")!;
      assert.equal(health.TargetGroupArn, ARN);
      assert.deepEqual(listOf(health, "Targets", "Id"), [I.old, I.stays, I.sick, I.fresh, I.gone]);
      assert.equal(health.Version, V2);
    });

    it("drain time: deregistration delay plus health check interval x unhealthy threshold, paged", async () => {
      elb.deregistrationDelay = "45";
      const o = await lb().observe([OLD]);
      assert.equal(o.drainSeconds, 45 + 10 * 3);
      const groups = elb.http.requests.filter((r) => r.Action === "DescribeTargetGroups");
      assert.deepEqual(
        groups.map((r) => [r["TargetGroupArns.member.1"], r.Marker]),
        [
          [ARN, undefined],
          [ARN, "page-2"],
        ],
        "the second page is asked for with the first's NextMarker",
      );
      assert.equal(elb.http.requests.find((r) => r.Action === "DescribeTargetGroupAttributes")?.TargetGroupArn, ARN);
    });

    it("timing is read once for many observations (a drain's wait asks health, not timing)", async () => {
      const edge = lb();
      for (let i = 0; i < 3; i++) await edge.observe([OLD]);
      assert.equal(elb.actions().filter((a) => a === "DescribeTargetHealth").length, 3);
      assert.equal(elb.actions().filter((a) => a === "DescribeTargetGroupAttributes").length, 1);
    });

    it("deregister-target: DeregisterTargets on 6443, then waits until AWS calls the target unused", async () => {
      const r = await deregister(lb(), [OLD, STAYS]);
      assert.deepEqual(r, { kind: "done" });
      const dereg = elb.http.requests.filter((x) => x.Action === "DeregisterTargets");
      assert.equal(dereg.length, 1);
      assert.equal(dereg[0].TargetGroupArn, ARN);
      assert.deepEqual(listOf(dereg[0], "Targets", "Id"), [I.old]);
      assert.equal(dereg[0]["Targets.member.1.Port"], "6443");
      // The act saw it draining before it was unused: it waited on AWS, not on a clock.
      const after = elb.actions().slice(elb.actions().indexOf("DeregisterTargets"));
      assert.ok(after.filter((a) => a === "DescribeTargetHealth").length >= elb.drainReads + 1, after.join(" "));
      assert.ok(!elb.targets.has(I.old));
      assert.ok(!elb.actions().includes("RegisterTargets"));
    });

    it("register: RegisterTargets on 6443 (a retirement that did not finish)", async () => {
      await lb().register(GONE);
      const reg = elb.http.requests.find((x) => x.Action === "RegisterTargets")!;
      assert.deepEqual(
        [reg.TargetGroupArn, reg["Targets.member.1.Id"], reg["Targets.member.1.Port"]],
        [ARN, I.gone, "6443"],
      );
    });

    it("AccessDenied names the IAM action molt lacks, and no secret", async () => {
      elb.denied.add("DescribeTargetHealth");
      const e = await lb()
        .observe([OLD])
        .then(
          () => assert.fail("observed without DescribeTargetHealth"),
          (x: Error) => x,
        );
      assert.match(e.message.split("\n")[0], /elasticloadbalancing:DescribeTargetHealth/);
      assert.match(e.message, /AccessDenied/);
      assert.match(e.message, /docs\/iam\/aws-molt\.json/);
      assert.match(e.message, /target group arn:aws:elasticloadbalancing:/);
      assert.ok(!e.message.includes(SECRET));

      elb.denied.add("DeregisterTargets");
      await assert.rejects(lb().deregister(OLD), (x: Error) => {
        assert.match(x.message, /elasticloadbalancing:DeregisterTargets .*denied/);
        assert.ok(!x.message.includes(SECRET));
        return true;
      });
    });

    it("a target group AWS does not know: its error, named", async () => {
      const other = ARN.replace("prod-api", "other");
      await assert.rejects(
        new AwsApiTargets({ targetGroupArn: other }, api()).observe([OLD]),
        /elasticloadbalancing:\w+ on target group .*other.* failed: TargetGroupNotFound/,
      );
    });
  });

  describe("classic ELB", () => {
    const lb = () => new AwsApiTargets({ classicElb: ELB }, api());
    beforeEach(() => {
      for (const id of Object.values(I)) elb.ec2.add(id);
      elb.ec2.delete(I.gone);
      elb.instances.set(I.old, { state: "InService" });
      elb.instances.set(I.stays, { state: "InService", description: DEREGISTERING });
      elb.instances.set(I.sick, {
        state: "OutOfService",
        reason: "Instance",
        description: "Instance has failed at least the UnhealthyThreshold number of health checks consecutively.",
      });
    });

    it("reads InService, draining, OutOfService and not registered; an unknown instance is left out", async () => {
      const o = await lb().observe([OLD, STAYS, SICK, FRESH, GONE]);
      assert.deepEqual(o.targets, {
        "prod-cp-1": { state: "healthy" },
        "prod-cp-2": { state: "draining", detail: DEREGISTERING },
        "prod-cp-3": {
          state: "unhealthy",
          detail: "Instance has failed at least the UnhealthyThreshold number of health checks consecutively.",
        },
        "prod-cp-4": { state: "unused", detail: NOT_REGISTERED },
        "prod-cp-5": { state: "unused", detail: "not registered" },
      });
      const health = elb.http.requests.filter((r) => r.Action === "DescribeInstanceHealth");
      assert.equal(health[0].LoadBalancerName, ELB);
      assert.equal(health[0].Version, CLASSIC);
      assert.deepEqual(listOf(health[0], "Instances", "InstanceId"), [I.old, I.stays, I.sick, I.fresh, I.gone]);
      // InvalidInstance for the whole call: each instance asked alone, the unknown one left out.
      assert.deepEqual(
        health.slice(1).map((r) => listOf(r, "Instances", "InstanceId")),
        [[I.old], [I.stays], [I.sick], [I.fresh], [I.gone]],
      );
    });

    it("drain time: connection draining's timeout plus the health check's, paged; 0 when draining is off", async () => {
      assert.equal((await lb().observe([OLD])).drainSeconds, 60 + 10 * 2);
      const pages = elb.http.requests.filter((r) => r.Action === "DescribeLoadBalancers");
      assert.deepEqual(
        pages.map((r) => [r["LoadBalancerNames.member.1"], r.Marker]),
        [
          [ELB, undefined],
          [ELB, "page-2"],
        ],
      );
      assert.equal(elb.http.requests.find((r) => r.Action === "DescribeLoadBalancerAttributes")?.LoadBalancerName, ELB);
      elb.draining = { enabled: false, timeout: 300 };
      assert.equal((await lb().observe([OLD])).drainSeconds, 10 * 2);
    });

    it("deregister-target: DeregisterInstancesFromLoadBalancer, then waits until the ELB lets it go", async () => {
      const r = await deregister(lb(), [OLD, STAYS]);
      assert.deepEqual(r, { kind: "done" });
      const dereg = elb.http.requests.filter((x) => x.Action === "DeregisterInstancesFromLoadBalancer");
      assert.deepEqual(
        dereg.map((x) => [x.LoadBalancerName, listOf(x, "Instances", "InstanceId")]),
        [[ELB, [I.old]]],
      );
      const after = elb.actions().slice(elb.actions().indexOf("DeregisterInstancesFromLoadBalancer"));
      assert.ok(after.filter((a) => a === "DescribeInstanceHealth").length >= elb.drainReads + 1, after.join(" "));
      assert.ok(!elb.actions().includes("RegisterInstancesWithLoadBalancer"));
    });

    it("register: RegisterInstancesWithLoadBalancer; the new instance is initial until InService", async () => {
      await lb().register(FRESH);
      const reg = elb.http.requests.find((x) => x.Action === "RegisterInstancesWithLoadBalancer")!;
      assert.deepEqual([reg.LoadBalancerName, reg["Instances.member.1.InstanceId"]], [ELB, I.fresh]);
      assert.deepEqual((await lb().observe([FRESH])).targets["prod-cp-4"], {
        state: "initial",
        detail: "Instance registration is still in progress.",
      });
    });

    it("AccessDenied names the IAM action molt lacks", async () => {
      elb.denied.add("DescribeLoadBalancerAttributes");
      await assert.rejects(lb().observe([OLD]), (e: Error) => {
        assert.match(e.message, /^elasticloadbalancing:DescribeLoadBalancerAttributes on classic ELB prod-api-lb/);
        assert.match(e.message, /denied \(AccessDenied\)/);
        assert.ok(!e.message.includes(SECRET));
        return true;
      });
    });
  });
});

describe("the AWS load balancer of a stack (orchestrator/edges/open.ts)", () => {
  let dir: string;
  const repo = join(__dirname, "..", "..", "..", "..");
  const example = () =>
    (parse(readFileSync(join(repo, "stacks", "Pulumi.aws.yaml"), "utf8")) as { config: Record<string, unknown> })
      .config;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "molt-aws-elb-"));
    mkdirSync(join(dir, "stacks"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const load = (edit: (c: Record<string, unknown>) => void, provider = "aws") => {
    const c =
      provider === "aws"
        ? example()
        : (
            parse(readFileSync(join(repo, "stacks", `Pulumi.${provider}.yaml`), "utf8")) as {
              config: Record<string, unknown>;
            }
          ).config;
    edit(c);
    writeFileSync(stackConfigPath(dir, "prod"), stringify({ config: c }));
    return loadStackConfig(dir, "prod");
  };
  const aws = (c: Record<string, unknown>) => c["molt:aws"] as Record<string, unknown>;

  /** `fn` with the SDK's own endpoint setting for `service` (also how a VPC interface endpoint is given). */
  const atEndpoint = async (service: string, fn: (elb: FakeElb) => Promise<void>) => {
    const elb = new FakeElb();
    const variable = `AWS_ENDPOINT_URL_${service}`;
    const saved = process.env[variable];
    process.env[variable] = await elb.http.start();
    try {
      await fn(elb);
    } finally {
      if (saved === undefined) delete process.env[variable];
      else process.env[variable] = saved;
      elb.http.close();
    }
  };

  it("an AWS stack retires through its target group, asked in the ARN's region; no warning", () =>
    atEndpoint("ELASTIC_LOAD_BALANCING_V2", async (elb) => {
      const cfg = load((c) => (c["aws:region"] = "us-west-2"));
      assert.equal(loadBalancerGap(cfg, {}), undefined);
      const edge = loadBalancerEdgeFor(cfg, { ...env, AWS_REGION: "us-east-1" });
      assert.ok(edge instanceof AwsApiTargets);
      elb.targets.set(I.old, { state: "healthy" });
      assert.deepEqual((await edge.observe([OLD])).targets["prod-cp-1"], { state: "healthy" });
      assert.equal(elb.http.requests.find((r) => r.Action === "DescribeTargetHealth")?.TargetGroupArn, ARN);
      assert.deepEqual([...new Set(elb.http.signatures.map((x) => x.region))], ["eu-central-1"]);
    }));

  it("an AWS stack with a classic ELB: asked by name in the stack's region", () =>
    atEndpoint("ELASTIC_LOAD_BALANCING", async (elb) => {
      const cfg = load((c) => (aws(c).loadBalancer = { classicElb: ELB }));
      assert.equal(loadBalancerGap(cfg, {}), undefined);
      const edge = loadBalancerEdgeFor(cfg, env);
      assert.ok(edge instanceof AwsApiTargets);
      elb.ec2.add(I.old);
      elb.instances.set(I.old, { state: "InService" });
      assert.deepEqual((await edge.observe([OLD])).targets["prod-cp-1"], { state: "healthy" });
      assert.equal(elb.http.requests.find((r) => r.Action === "DescribeInstanceHealth")?.LoadBalancerName, ELB);
      assert.deepEqual([...new Set(elb.http.signatures.map((x) => x.region))], ["eu-central-1"]);
    }));

  it("signs with the profile the run's env names (AWS_PROFILE), not the process's default chain", () =>
    atEndpoint("ELASTIC_LOAD_BALANCING_V2", async (elb) => {
      const names = [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
      ];
      const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
      for (const n of names) delete process.env[n];
      const credentials = join(dir, "credentials");
      writeFileSync(
        credentials,
        "[default]\naws_access_key_id = AKIADEFAULTPROCESS00\naws_secret_access_key = d\n" +
          `[molt-run]\naws_access_key_id = AKIARUNPROFILE000000\naws_secret_access_key = ${SECRET}\n`,
      );
      // Where the shared files are is the process's; which profile is the run's.
      process.env.AWS_SHARED_CREDENTIALS_FILE = credentials;
      process.env.AWS_CONFIG_FILE = join(dir, "no-config");
      try {
        const edge = loadBalancerEdgeFor(
          load(() => undefined),
          { ...process.env, AWS_PROFILE: "molt-run" },
        );
        elb.targets.set(I.old, { state: "healthy" });
        assert.deepEqual((await edge!.observe([OLD])).targets["prod-cp-1"], { state: "healthy" });
        assert.deepEqual([...new Set(elb.http.signatures.map((x) => x.accessKeyId))], ["AKIARUNPROFILE000000"]);
        // Keys in the run's env come first, as the engine's AWS provider takes them.
        const before = elb.http.signatures.map((x) => x.accessKeyId).length;
        const keyed = loadBalancerEdgeFor(
          load(() => undefined),
          { ...env, AWS_PROFILE: "molt-run" },
        );
        await keyed!.observe([OLD]);
        assert.deepEqual(
          [...new Set(elb.http.signatures.map((x) => x.accessKeyId).slice(before))],
          [env.AWS_ACCESS_KEY_ID],
        );
      } finally {
        for (const n of names) {
          if (saved[n] === undefined) delete process.env[n];
          else process.env[n] = saved[n];
        }
      }
    }));

  it("a classic ELB without a region: every target unobserved, saying what to set (none retires blind)", async () => {
    const cfg = load((c) => {
      delete c["aws:region"];
      aws(c).loadBalancer = { classicElb: ELB };
    });
    const edge = loadBalancerEdgeFor(cfg, {});
    assert.ok(edge instanceof AwsApiTargets);
    await assert.rejects(edge.observe([OLD]), /no AWS region for the classic ELB: set molt:aws\.region or aws:region/);
    await assert.rejects(edge.deregister(OLD), /no AWS region/);
  });

  it("vSphere behind a load balancer outside molt is warned about; with a VIP it is not", () => {
    const outside = load(() => undefined, "vsphere");
    assert.match(String(loadBalancerGap(outside, {})), /cannot ask the load balancer in front of the vSphere nodes/);
    assert.equal(loadBalancerEdgeFor(outside, {}), undefined);
    const vip = load((c) => {
      c["molt:apiEndpoint"] = { mode: "vip", address: "10.20.0.100", virtualRouterId: 51 };
      (c["molt:bootstrap"] as Record<string, unknown>).controlPlaneEndpoint = "10.20.0.100:6443";
    }, "vsphere");
    assert.equal(loadBalancerGap(vip, {}), undefined);
  });
});
