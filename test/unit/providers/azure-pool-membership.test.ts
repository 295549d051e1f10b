// An adopted Azure VM's backend pool membership at run time (infra/providers/azure/
// pool-membership-impl.ts): recorded without a change, left with a conditional PUT of the
// owner's NIC that keeps everything else, and Azure Resource Manager reached as it answers
// (a local HTTP server stands in for it: paths, api-versions, bearer token, If-Match, errors).
import * as assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  armClient,
  configurationsInPool,
  leavePool,
  NETWORK_API_VERSION,
  verifyMembership,
  withoutPool,
  type Arm,
  type ArmResource,
} from "../../../infra/providers/azure/pool-membership-impl";

const rg = "/subscriptions/s1/resourceGroups/kubeone-rg/providers";
const POOL = `${rg}/Microsoft.Network/loadBalancers/kubernetes/backendAddressPools/ApiServers`;
const OTHER_POOL = `${rg}/Microsoft.Network/loadBalancers/ingress/backendAddressPools/web`;
const VM = `${rg}/Microsoft.Compute/virtualMachines/kubeone-cp-0`;
const NIC = `${rg}/Microsoft.Network/networkInterfaces/kubeone-cp-0`;

const nic = (pools: string[], state = "Succeeded", etag = 'W/"1"'): ArmResource => ({
  id: NIC,
  etag,
  location: "westeurope",
  properties: {
    provisioningState: state,
    enableAcceleratedNetworking: true,
    ipConfigurations: [
      {
        name: "kubeone-cp-0",
        properties: {
          privateIPAddress: "172.16.1.4",
          subnet: { id: `${rg}/Microsoft.Network/virtualNetworks/kubeone/subnets/kubeone` },
          loadBalancerBackendAddressPools: pools.map((id) => ({ id })),
        },
      },
    ],
  },
});
const vm: ArmResource = {
  id: VM,
  properties: { networkProfile: { networkInterfaces: [{ id: NIC, properties: { primary: true } }] } },
};

/** An ARM fake over a map of resources; `afterPut` is what the NIC reads as while Azure applies a PUT. */
function fakeArm(resources: Map<string, ArmResource>, afterPut: ArmResource[] = []) {
  const puts: Array<{ id: string; body: ArmResource; etag?: string }> = [];
  const arm: Arm = {
    async get(id) {
      if (id === NIC && puts.length && afterPut.length) return afterPut.shift();
      return resources.get(id);
    },
    async put(id, _v, body, etag) {
      puts.push({ id, body, etag });
      resources.set(id, { ...body, properties: { ...body.properties, provisioningState: "Succeeded" } });
    },
  };
  return { arm, puts };
}

const instant = { deadlineMs: 10_000, pollMs: 1, sleep: async () => undefined };

describe("an adopted Azure VM in the API backend pool (pool-membership-impl.ts)", () => {
  it("records the NIC configuration that holds the pool, and changes nothing", async () => {
    const { arm, puts } = fakeArm(
      new Map([
        [VM, vm],
        [NIC, nic([OTHER_POOL, POOL.toLowerCase()])],
      ]),
    );
    assert.deepEqual(await verifyMembership(arm, { vmId: VM, backendPoolId: POOL }), {
      vmId: VM,
      backendPoolId: POOL,
      nicId: NIC,
      ipConfigurations: ["kubeone-cp-0"],
    });
    assert.equal(puts.length, 0);
  });

  it("refuses a VM whose NIC is not in the pool (not this cluster's load balancer), changing nothing", async () => {
    const { arm, puts } = fakeArm(
      new Map([
        [VM, vm],
        [NIC, nic([OTHER_POOL])],
      ]),
    );
    await assert.rejects(
      verifyMembership(arm, { vmId: VM, backendPoolId: POOL }),
      /is not in backend pool .*ApiServers/,
    );
    await assert.rejects(verifyMembership(fakeArm(new Map()).arm, { vmId: VM, backendPoolId: POOL }), /does not exist/);
    assert.equal(puts.length, 0);
  });

  it("leaves the pool with one PUT of the same NIC, on its ETag, every other setting and pool kept", async () => {
    const { arm, puts } = fakeArm(new Map([[NIC, nic([OTHER_POOL, POOL])]]));
    const changed = await leavePool(
      arm,
      { vmId: VM, backendPoolId: POOL, nicId: NIC, ipConfigurations: ["kubeone-cp-0"] },
      instant,
    );
    assert.equal(changed, true);
    assert.equal(puts.length, 1);
    assert.equal(puts[0].etag, 'W/"1"', "only if nobody changed the NIC since it was read");
    assert.deepEqual(puts[0].body, withoutPool(nic([OTHER_POOL, POOL]), POOL));
    assert.deepEqual(configurationsInPool(puts[0].body, POOL), []);
    assert.deepEqual(puts[0].body.properties?.ipConfigurations?.[0].properties?.loadBalancerBackendAddressPools, [
      { id: OTHER_POOL },
    ]);
    assert.equal(puts[0].body.properties?.ipConfigurations?.[0].properties?.privateIPAddress, "172.16.1.4");
    assert.equal(puts[0].body.properties?.enableAcceleratedNetworking, true);
  });

  it("waits until Azure has applied it, and says so when it fails or takes too long", async () => {
    const props = { vmId: VM, backendPoolId: POOL, nicId: NIC, ipConfigurations: ["kubeone-cp-0"] };
    const updating = withoutPool(nic([POOL], "Updating"), POOL);
    const done = fakeArm(new Map([[NIC, nic([POOL])]]), [updating, updating]);
    assert.equal(await leavePool(done.arm, props, instant), true);

    const failed = fakeArm(new Map([[NIC, nic([POOL])]]), [withoutPool(nic([POOL], "Failed"), POOL)]);
    await assert.rejects(leavePool(failed.arm, props, instant), /Azure failed to apply its removal/);

    let t = 0;
    const stuck = fakeArm(new Map([[NIC, nic([POOL])]]), Array(100).fill(updating));
    await assert.rejects(
      leavePool(stuck.arm, props, {
        deadlineMs: 5_000,
        pollMs: 1_000,
        now: () => t,
        sleep: async (ms) => void (t += ms),
      }),
      /still in backend pool .* \(provisioning Updating\) after 5 s/,
    );
  });

  it("has nothing to do for a NIC that left the pool already, or is gone with its VM", async () => {
    const props = { vmId: VM, backendPoolId: POOL, nicId: NIC, ipConfigurations: ["kubeone-cp-0"] };
    const left = fakeArm(new Map([[NIC, nic([OTHER_POOL])]]));
    assert.equal(await leavePool(left.arm, props, instant), false);
    const gone = fakeArm(new Map());
    assert.equal(await leavePool(gone.arm, props, instant), false);
    assert.equal(left.puts.length + gone.puts.length, 0);
  });

  describe("Azure Resource Manager over HTTP", () => {
    let server: Server;
    let endpoint: string;
    const seen: Array<{ method: string; url: string; auth?: string; ifMatch?: string; body: string }> = [];
    let reply: (req: IncomingMessage) => [number, unknown] = () => [200, {}];
    before(async () => {
      server = createServer((req, res) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          seen.push({
            method: req.method!,
            url: req.url!,
            auth: req.headers.authorization,
            ifMatch: req.headers["if-match"] as string | undefined,
            body,
          });
          const [status, json] = reply(req);
          res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json));
        });
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => server.close());
    beforeEach(() => (seen.length = 0));

    const credential = {
      scopes: [] as string[],
      async getToken(scope: string | string[]) {
        credential.scopes.push(String(scope));
        return { token: "t0ken", expiresOnTimestamp: Date.now() + 60_000 };
      },
    };

    it(
      "GETs the resource at its id with the api-version and a " + "bearer token for the ARM scope; 404 is nothing",
      async () => {
        const arm = armClient(credential, endpoint);
        reply = () => [200, nic([POOL])];
        assert.deepEqual(configurationsInPool((await arm.get(NIC, NETWORK_API_VERSION))!, POOL), ["kubeone-cp-0"]);
        assert.equal(seen[0].url, `${NIC}?api-version=${NETWORK_API_VERSION}`);
        assert.equal(seen[0].auth, "Bearer t0ken");
        assert.equal(credential.scopes.at(-1), `${endpoint}/.default`);
        reply = () => [404, { error: { code: "NotFound", message: "gone" } }];
        assert.equal(await arm.get(NIC, NETWORK_API_VERSION), undefined);
      },
    );

    it(
      "PUTs the whole resource with If-Match, and names Azure's " + "error (a changed ETag says to run again)",
      async () => {
        const arm = armClient(credential, endpoint);
        reply = () => [200, {}];
        const body = withoutPool(nic([POOL]), POOL);
        await arm.put(NIC, NETWORK_API_VERSION, body, 'W/"1"');
        assert.equal(seen[0].method, "PUT");
        assert.equal(seen[0].ifMatch, 'W/"1"');
        assert.deepEqual(JSON.parse(seen[0].body), body);
        reply = () => [412, { error: { code: "PreconditionFailed", message: "etag" } }];
        await assert.rejects(arm.put(NIC, NETWORK_API_VERSION, body, 'W/"1"'), /changed by someone else .*run again/);
        reply = () => [
          403,
          { error: { code: "AuthorizationFailed", message: "no Microsoft.Network/networkInterfaces/write" } },
        ];
        await assert.rejects(
          arm.put(NIC, NETWORK_API_VERSION, body, 'W/"1"'),
          /writing .*kubeone-cp-0: HTTP 403 AuthorizationFailed: no Microsoft\.Network\/networkInterfaces\/write/,
        );
        reply = () => [500, "oops"];
        await assert.rejects(arm.get(NIC, NETWORK_API_VERSION), (e: Error) => {
          assert.match(e.message, /reading .*HTTP 500/);
          assert.ok(!e.message.includes("t0ken"), "the bearer token is in no error");
          return true;
        });
      },
    );
  });
});
