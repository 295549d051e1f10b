// Leaked VMs on Azure: orchestrator/edges/azure-inventory.ts against a local server that
// speaks Azure Resource Manager for the calls it makes (VM list with nextLink paging, NIC
// read, DELETE with an async operation to follow), and inventoryOf's Azure row.
import { strict as assert } from "node:assert";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TokenCredential } from "@azure/identity";
import { azureInventory } from "../../../orchestrator/edges/azure-inventory";
import { leakedMachines, TerminateMachinesError } from "../../../orchestrator/core/leaks";
import { inventoryOf } from "../../../orchestrator/leaks";
import type { StackConfig } from "../../../orchestrator/config";

const SUB = "00000000-0000-0000-0000-000000000001";
const RG = `/subscriptions/${SUB}/resourceGroups/molt-prod`;
const TOKEN = "eyJ0eXAiOiJKV1Qi.secret";
const credential: TokenCredential = {
  getToken: () => Promise.resolve({ token: TOKEN, expiresOnTimestamp: Date.now() + 3_600_000 }),
};

interface FakeVm {
  name: string;
  ip: string;
  tags: Record<string, string>;
  state?: string;
  /** How the deletion is followed: Azure-AsyncOperation, Location, done at once, or refused. */
  deletion?: "async" | "location" | "sync" | "forbidden";
}

/** ARM for: VMs of a resource group (pages of 2), a NIC, DELETE of a VM and its operation. */
class FakeArm {
  readonly requests: { method: string; path: string }[] = [];
  /** Polls an operation answers "InProgress" before it ends. */
  pollsBeforeDone = 1;
  /** Where the first page's nextLink points (default: this server). */
  nextLinkOrigin?: string;
  server!: Server;
  base = "";
  private polls = new Map<string, number>();
  constructor(readonly vms: FakeVm[]) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const url = new URL(req.url!, this.base);
      this.requests.push({ method: req.method!, path: url.pathname });
      res.setHeader("content-type", "application/json");
      const send = (status: number, body?: unknown, headers: Record<string, string> = {}) => {
        for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
        res.statusCode = status;
        res.end(body === undefined ? "" : JSON.stringify(body));
      };
      if (req.headers.authorization !== `Bearer ${TOKEN}`)
        return send(401, { error: { code: "AuthenticationFailed", message: "no token" } });
      if (!url.searchParams.get("api-version"))
        return send(400, { error: { code: "MissingApiVersionParameter", message: "api-version" } });
      const vmList = `${RG}/providers/Microsoft.Compute/virtualMachines`;
      const vm = /\/virtualMachines\/([^/]+)$/.exec(url.pathname)?.[1];
      const nic = /\/networkInterfaces\/([^/]+)-nic$/.exec(url.pathname)?.[1];
      const op = /^\/operations\/(async|location)\/(.+)$/.exec(url.pathname);
      if (req.method === "GET" && url.pathname === vmList) {
        const start = Number(url.searchParams.get("skip") ?? 0);
        const page = this.vms.slice(start, start + 2);
        const more = start + 2 < this.vms.length;
        const origin = start === 0 && this.nextLinkOrigin ? this.nextLinkOrigin : this.base;
        return send(200, {
          value: page.map((v) => this.vmBody(v)),
          ...(more ? { nextLink: `${origin}${vmList}?api-version=2024-07-01&skip=${start + 2}` } : {}),
        });
      }
      if (req.method === "GET" && nic) {
        const v = this.vms.find((x) => x.name === nic);
        if (!v) return send(404, { error: { code: "NotFound", message: nic } });
        return send(200, {
          properties: { ipConfigurations: [{ properties: { primary: true, privateIPAddress: v.ip } }] },
        });
      }
      if (req.method === "DELETE" && vm) {
        const v = this.vms.find((x) => x.name === vm);
        if (!v) return send(204);
        if (v.deletion === "forbidden")
          return send(403, {
            error: { code: "AuthorizationFailed", message: "no Microsoft.Compute/virtualMachines/delete" },
          });
        if (v.deletion === "sync") {
          this.vms.splice(this.vms.indexOf(v), 1);
          return send(200);
        }
        v.state = "Deleting";
        const kind = v.deletion === "location" ? "location" : "async";
        const opUrl = `${this.base}/operations/${kind}/${vm}?api-version=2024-07-01`;
        return send(
          202,
          undefined,
          kind === "async" ? { "azure-asyncoperation": opUrl, "retry-after": "0" } : { location: opUrl },
        );
      }
      if (req.method === "GET" && op) {
        const n = (this.polls.get(op[2]) ?? 0) + 1;
        this.polls.set(op[2], n);
        const done = n > this.pollsBeforeDone;
        if (done) {
          const i = this.vms.findIndex((x) => x.name === op[2]);
          if (i >= 0) this.vms.splice(i, 1);
        }
        if (op[1] === "async") return send(200, { status: done ? "Succeeded" : "InProgress" });
        return done ? send(200) : send(202, undefined, { location: `${this.base}${req.url}` });
      }
      return send(404, { error: { code: "NotFound", message: url.pathname } });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.base;
  }

  id(name: string): string {
    return `${RG}/providers/Microsoft.Compute/virtualMachines/${name}`;
  }

  private vmBody(v: FakeVm) {
    return {
      // ARM returns the resource group's name in the case it keeps it in: here upper case.
      id: this.id(v.name).replace("/resourceGroups/molt-prod/", "/resourceGroups/MOLT-PROD/"),
      name: v.name,
      type: "Microsoft.Compute/virtualMachines",
      tags: v.tags,
      properties: {
        provisioningState: v.state ?? "Succeeded",
        timeCreated: "2026-12-03T10:00:00.0000000+00:00",
        networkProfile: {
          networkInterfaces: [
            { id: `${RG}/providers/Microsoft.Network/networkInterfaces/${v.name}-nic`, properties: { primary: true } },
          ],
        },
      },
    };
  }
}

const cp = (cluster: string, node: string) => ({
  "molt.io/cluster": cluster,
  "molt.io/role": "control-plane",
  "molt.io/node": node,
  "molt.io/generation": "1",
});

describe("leaked VMs on Azure (Resource Manager on a local server)", () => {
  let arm: FakeArm;
  let endpoint: string;
  const inv = (over: Partial<Parameters<typeof azureInventory>[0]> = {}) =>
    azureInventory({
      subscription: SUB,
      resourceGroupName: "molt-prod",
      clusterName: "prod",
      endpoint,
      credential,
      pollMs: { min: 5, max: 50 },
      ...over,
    });
  beforeEach(async () => {
    arm = new FakeArm([
      { name: "prod-1", ip: "10.1.0.4", tags: cp("prod", "prod-1") },
      { name: "prod-2", ip: "10.1.0.5", tags: cp("prod", "prod-2"), deletion: "async" },
      { name: "staging-1", ip: "10.1.0.6", tags: cp("staging", "staging-1") },
      { name: "worker-1", ip: "10.1.0.7", tags: { "molt.io/cluster": "prod", "molt.io/role": "worker" } },
      { name: "prod-3", ip: "10.1.0.8", tags: cp("prod", "prod-3"), deletion: "location" },
      { name: "prod-4", ip: "10.1.0.9", tags: cp("prod", "prod-4"), deletion: "forbidden" },
      { name: "other", ip: "10.1.0.10", tags: {} },
    ]);
    endpoint = await arm.start();
  });
  afterEach(() => arm.server.close());

  it("lists this cluster's control-plane VMs only, across nextLink pages, with node tag and NIC address", async () => {
    const listed = await inv().list();
    assert.deepEqual(
      listed.map((m) => [m.id.split("/").pop(), m.node, m.address, m.state]),
      [
        ["prod-1", "prod-1", "10.1.0.4", "Succeeded"],
        ["prod-2", "prod-2", "10.1.0.5", "Succeeded"],
        ["prod-3", "prod-3", "10.1.0.8", "Succeeded"],
        ["prod-4", "prod-4", "10.1.0.9", "Succeeded"],
      ],
    );
    const pages = arm.requests.filter((r) => r.path.endsWith("/virtualMachines"));
    assert.equal(pages.length, 4, "7 VMs in pages of 2");
    assert.equal(inv().where, `azure ${SUB}/molt-prod`);
  });

  it("the state's id matches ARM's whatever the case; a VM being deleted is not a leak", async () => {
    const i = inv();
    arm.vms[0].state = "Deleting";
    const listed = await i.list();
    const held = [arm.id("prod-2"), arm.id("prod-3"), arm.id("prod-4")];
    const v = leakedMachines(listed, held, [], true, () => true, i.idKey);
    assert.deepEqual(v, [], "held in any case, or on its way out");
    // Without the case-insensitive key the held VMs would be reported as leaked.
    assert.equal(leakedMachines(listed, held, [], true, () => true).length, 3);
  });

  it("deletes and follows Azure-AsyncOperation and Location until the VM is gone", async () => {
    arm.pollsBeforeDone = 2;
    const i = inv();
    await i.terminate([arm.id("prod-2"), arm.id("prod-3")]);
    assert.deepEqual(
      arm.vms.map((v) => v.name),
      ["prod-1", "staging-1", "worker-1", "prod-4", "other"],
    );
    assert.equal(arm.requests.filter((r) => r.path === "/operations/async/prod-2").length, 3);
    assert.equal(arm.requests.filter((r) => r.path === "/operations/location/prod-3").length, 3);
    await i.terminate([]);
    assert.equal(arm.requests.filter((r) => r.method === "DELETE").length, 2, "nothing to delete: no call");
  });

  it("a deletion that does not end within the deadline fails saying so", async () => {
    arm.pollsBeforeDone = 1_000_000;
    await assert.rejects(
      inv({ deleteDeadlineMs: 300 }).terminate([arm.id("prod-2")]),
      /deleting VM .*prod-2: not done after 0 s|aborted|timeout/i,
    );
  });

  it("an ARM error reaches the caller with its code, and without the token", async () => {
    const e = await inv()
      .terminate([arm.id("prod-4")])
      .then(
        () => undefined,
        (x: Error) => x,
      );
    assert.ok(e, "the refusal is an error");
    assert.match(e.message, /HTTP 403 AuthorizationFailed/);
    assert.ok(!e.message.includes(TOKEN));
  });

  it("one of three that is refused: the other two are deleted, and the error names both lists", async () => {
    const ids = [arm.id("prod-2"), arm.id("prod-4"), arm.id("prod-3")];
    const e = await inv()
      .terminate(ids)
      .then(
        () => assert.fail("terminate did not fail"),
        (x: unknown) => x,
      );
    assert.ok(e instanceof TerminateMachinesError, String(e));
    assert.deepEqual(e.terminated, [arm.id("prod-2"), arm.id("prod-3")]);
    assert.deepEqual(
      e.failed.map((f) => f.id),
      [arm.id("prod-4")],
    );
    assert.match(e.failed[0].error, /HTTP 403 AuthorizationFailed/);
    assert.ok(!e.message.includes(TOKEN));
    assert.deepEqual(
      arm.vms.map((v) => v.name),
      ["prod-1", "staging-1", "worker-1", "prod-4", "other"],
      "the two it could delete are gone",
    );
  });

  it("a nextLink to another host is refused: the token goes to the Resource Manager endpoint only", async () => {
    arm.nextLinkOrigin = "http://127.0.0.2:1";
    await assert.rejects(inv().list(), /outside http:\/\/127\.0\.0\.1/);
  });
});

describe("inventoryOf: Azure", () => {
  it("an Azure stack gets an inventory of its resource group, whose machines are the state's VMs", () => {
    const dir = mkdtempSync(join(tmpdir(), "molt-inv-"));
    const file = join(dir, "Pulumi.azure.yaml");
    writeFileSync(file, "config: {}\n");
    const cfg = {
      file,
      cloud: {
        provider: "azure",
        bootstrap: { clusterName: "prod" },
        azure: {
          resourceGroupName: "molt-prod",
          subnetId: `${RG}/providers/Microsoft.Network/virtualNetworks/v/subnets/s`,
        },
      },
    } as unknown as StackConfig;
    const i = inventoryOf(cfg);
    assert.ok(i);
    assert.equal(i.resourceType, "azure-native:compute:VirtualMachine");
    assert.equal(i.where, `azure ${SUB}/molt-prod`);
    assert.equal(i.idKey?.("/A/B"), "/a/b");
  });
});
