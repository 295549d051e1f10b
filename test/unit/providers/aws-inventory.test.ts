// Leaked instances: the pure verdicts (core/leaks.ts) and the real EC2 client of
// orchestrator/edges/aws-inventory.ts against a local server that speaks EC2's query
// protocol (no AWS API is reachable from here).
import { strict as assert } from "node:assert";
import { AwsQueryServer } from "../../support/aws-query-server";
import { awsInventory } from "../../../orchestrator/edges/aws-inventory";
import { leakedMachines, TerminateMachinesError, type CloudMachine } from "../../../orchestrator/core/leaks";
import type { Member } from "../../../orchestrator/core/observations";

interface FakeInstance {
  id: string;
  state: string;
  ip: string;
  tags: Record<string, string>;
}

/** EC2's query API for DescribeInstances (tag and state filters, paging) and TerminateInstances. */
class FakeEc2 {
  readonly http = new AwsQueryServer({
    handlers: {
      DescribeInstances: (r) => this.describe(r.params),
      TerminateInstances: (r) => this.terminate(r.params),
    },
    error,
    unsigned: { status: 401, code: "AuthFailure" },
  });
  constructor(
    readonly instances: FakeInstance[],
    private readonly pageSize = 2,
  ) {}

  private describe(p: Record<string, string>): string {
    const filters: { name: string; values: string[] }[] = [];
    for (let i = 1; p[`Filter.${i}.Name`]; i++) {
      const values: string[] = [];
      for (let j = 1; p[`Filter.${i}.Value.${j}`] !== undefined; j++) values.push(p[`Filter.${i}.Value.${j}`]);
      filters.push({ name: p[`Filter.${i}.Name`], values });
    }
    const match = (x: FakeInstance) =>
      filters.every((f) =>
        f.name === "instance-state-name"
          ? f.values.includes(x.state)
          : f.name.startsWith("tag:")
            ? f.values.includes(x.tags[f.name.slice(4)] ?? "\u0000")
            : false,
      );
    const all = this.instances.filter(match);
    const start = Number(p.NextToken ?? 0);
    const page = all.slice(start, start + Math.min(this.pageSize, Number(p.MaxResults ?? 1000)));
    const next = start + page.length < all.length ? `<nextToken>${start + page.length}</nextToken>` : "";
    const items = page
      .map(
        (x) =>
          `<item><reservationId>r-${x.id}</reservationId><instancesSet><item><instanceId>${x.id}</instanceId>` +
          `<instanceState><code>16</code><name>${x.state}</name></instanceState>` +
          `<privateIpAddress>${x.ip}</privateIpAddress><launchTime>2026-12-03T10:00:00.000Z</launchTime><tagSet>` +
          Object.entries(x.tags)
            .map(([k, v]) => `<item><key>${k}</key><value>${v}</value></item>`)
            .join("") +
          `</tagSet></item></instancesSet></item>`,
      )
      .join("");
    return (
      `<?xml version="1.0" encoding="UTF-8"?><DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">` +
      `<requestId>1</requestId><reservationSet>${items}</reservationSet>${next}</DescribeInstancesResponse>`
    );
  }

  private terminate(p: Record<string, string>): string {
    const items: string[] = [];
    for (let i = 1; p[`InstanceId.${i}`]; i++) {
      const x = this.instances.find((y) => y.id === p[`InstanceId.${i}`]);
      if (!x) throw { code: "InvalidInstanceID.NotFound", message: p[`InstanceId.${i}`] };
      x.state = "shutting-down";
      items.push(
        `<item><instanceId>${x.id}</instanceId><currentState><code>32</code><name>shutting-down</name></currentState>` +
          `<previousState><code>16</code><name>running</name></previousState></item>`,
      );
    }
    return (
      `<?xml version="1.0" encoding="UTF-8"?><TerminateInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">` +
      `<requestId>2</requestId><instancesSet>${items.join("")}</instancesSet></TerminateInstancesResponse>`
    );
  }
}

function error(code: string, message: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>${code}</Code>` +
    `<Message>${message}</Message></Error></Errors><RequestID>e</RequestID></Response>`
  );
}

const cp = (cluster: string, node: string) => ({
  "molt.io/cluster": cluster,
  "molt.io/role": "control-plane",
  "molt.io/node": node,
});
const env = {
  AWS_ACCESS_KEY_ID: "AKIAIOSFODNN7EXAMPLE",
  AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};

describe("leaked instances on AWS (EC2 query API on a local server)", () => {
  let ec2: FakeEc2;
  let endpoint: string;
  beforeEach(async () => {
    ec2 = new FakeEc2([
      { id: "i-000000000000000a1", state: "running", ip: "10.0.1.10", tags: cp("prod", "prod-1") },
      { id: "i-000000000000000a2", state: "running", ip: "10.0.2.10", tags: cp("prod", "prod-2") },
      { id: "i-000000000000000a3", state: "stopped", ip: "10.0.3.10", tags: cp("prod", "prod-3") },
      { id: "i-000000000000000b1", state: "running", ip: "10.0.1.11", tags: cp("staging", "staging-1") },
      { id: "i-000000000000000c1", state: "running", ip: "10.0.1.12", tags: { "molt.io/cluster": "prod" } },
      { id: "i-000000000000000d1", state: "terminated", ip: "10.0.1.13", tags: cp("prod", "prod-0") },
    ]);
    endpoint = await ec2.http.start();
  });
  afterEach(() => ec2.http.close());

  it("lists this cluster's control-plane instances only, across pages, with node tag and address", async () => {
    const inv = awsInventory({ region: "eu-central-1", clusterName: "prod", endpoint, env });
    const listed = await inv.list();
    assert.deepEqual(
      listed.map((m) => [m.id, m.node, m.address, m.state]),
      [
        ["i-000000000000000a1", "prod-1", "10.0.1.10", "running"],
        ["i-000000000000000a2", "prod-2", "10.0.2.10", "running"],
        ["i-000000000000000a3", "prod-3", "10.0.3.10", "stopped"],
      ],
    );
    assert.equal(ec2.http.requests.filter((r) => r.Action === "DescribeInstances").length, 2, "two pages of 2");
    assert.equal(inv.where, "aws eu-central-1");
  });

  it("terminates exactly the ids it is given", async () => {
    const inv = awsInventory({ region: "eu-central-1", clusterName: "prod", endpoint, env });
    await inv.terminate(["i-000000000000000a2"]);
    assert.deepEqual(
      ec2.instances.filter((x) => x.state === "shutting-down").map((x) => x.id),
      ["i-000000000000000a2"],
    );
    assert.deepEqual((await inv.list()).map((m) => m.id).sort(), ["i-000000000000000a1", "i-000000000000000a3"]);
    await inv.terminate([]);
    assert.equal(
      ec2.http.requests.filter((r) => r.Action === "TerminateInstances").length,
      1,
      "nothing to terminate: no call",
    );
  });

  it("one of three that fails: the other two are terminated, and the error names both lists", async () => {
    const inv = awsInventory({ region: "eu-central-1", clusterName: "prod", endpoint, env });
    const ids = ["i-000000000000000a1", "i-0000000000000dead", "i-000000000000000a3"];
    const e = await inv.terminate(ids).then(
      () => assert.fail("terminate did not fail"),
      (x: unknown) => x,
    );
    assert.ok(e instanceof TerminateMachinesError, String(e));
    assert.deepEqual([...e.terminated].sort(), ["i-000000000000000a1", "i-000000000000000a3"]);
    assert.deepEqual(
      e.failed.map((f) => f.id),
      ["i-0000000000000dead"],
    );
    assert.match(e.failed[0].error, /InvalidInstanceID.NotFound|i-0000000000000dead/);
    assert.match(e.message, /1 NOT terminated \(i-0000000000000dead: .*\); terminated: i-0+a1, i-0+a3/);
    assert.deepEqual(
      ec2.instances.filter((x) => x.state === "shutting-down").map((x) => x.id),
      ["i-000000000000000a1", "i-000000000000000a3"],
    );
  });

  it("an EC2 error reaches the caller", async () => {
    const inv = awsInventory({ region: "eu-central-1", clusterName: "prod", endpoint, env });
    await assert.rejects(inv.terminate(["i-0000000000000dead"]), /InvalidInstanceID.NotFound|i-0000000000000dead/);
  });
});

describe("leaked machines: the verdicts (core/leaks.ts)", () => {
  const m = (id: string, address: string, state = "running"): CloudMachine => ({ id, address, state, node: id });
  const member = (host: string): Member => ({
    id: "1",
    name: host,
    peerURLs: [`https://${host}:2380`],
    clientURLs: [],
    isLearner: false,
  });
  const listed = [
    m("i-held", "10.0.0.1"),
    m("i-leak", "10.0.0.2"),
    m("i-joined", "10.0.0.3"),
    m("i-going", "10.0.0.4", "shutting-down"),
  ];

  const own = () => true;
  const rows: { name: string; terminate: boolean; members: Member[] | undefined; want: Record<string, string> }[] = [
    {
      name: "without the flag: reported, nothing terminated",
      terminate: false,
      members: [member("10.0.0.1")],
      want: { "i-leak": "keep", "i-joined": "keep" },
    },
    {
      name: "with the flag: the one etcd does not list is terminated, the member kept",
      terminate: true,
      members: [member("10.0.0.1"), member("10.0.0.3")],
      want: { "i-leak": "terminate", "i-joined": "keep" },
    },
    {
      name: "with the flag but etcd unseen: nothing terminated",
      terminate: true,
      members: undefined,
      want: { "i-leak": "keep", "i-joined": "keep" },
    },
    {
      name: "with the flag and no member at either address: both terminated",
      terminate: true,
      members: [member("10.0.0.1")],
      want: { "i-leak": "terminate", "i-joined": "terminate" },
    },
  ];
  for (const r of rows)
    it(r.name, () => {
      const v = leakedMachines(listed, ["i-held"], r.members, r.terminate, own);
      assert.deepEqual(Object.fromEntries(v.map((x) => [x.machine.id, x.action])), r.want);
      for (const x of v) if (x.action === "keep") assert.match(x.reason, /^not terminated: /);
    });

  it("another stack's machine (same cluster name) is left out; no node tag or no address: never terminated", () => {
    const ours = (n: string) => n.startsWith("prod-cp-");
    const v = leakedMachines(
      [
        { id: "i-ours", node: "prod-cp-4", address: "10.0.0.5", state: "running" },
        { id: "i-staging", node: "staging-cp-2", address: "10.0.0.6", state: "running" },
        { id: "i-untagged", address: "10.0.0.7", state: "running" },
        { id: "i-noaddr", node: "prod-cp-5", state: "running" },
      ],
      ["i-held"],
      [member("10.0.0.1")],
      true,
      ours,
    );
    assert.deepEqual(Object.fromEntries(v.map((x) => [x.machine.id, x.action])), {
      "i-ours": "terminate",
      "i-untagged": "keep",
      "i-noaddr": "keep",
    });
  });

  it("a state read back without any machine terminates nothing (an empty read is not proof of a leak)", () => {
    const v = leakedMachines(listed, [], [member("10.0.0.1")], true, own);
    assert.ok(v.length > 0 && v.every((x) => x.action === "keep"));
  });

  it("an IPv6 peer URL matches the machine's address", () => {
    const v = leakedMachines(
      [m("i-6", "fd00::3")],
      [],
      [{ ...member("x"), peerURLs: ["https://[fd00::3]:2380"] }],
      true,
      own,
    );
    assert.equal(v[0].action, "keep");
  });
});
