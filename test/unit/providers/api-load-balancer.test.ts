// Adoption's check that the stack's load balancer serves controlPlaneEndpoint
// (infra/providers/api-load-balancer.ts): the verdict over what the nodes resolve and what the
// cloud describes, and how a failed program carries it back to `molt adopt`.
import * as assert from "node:assert/strict";
import {
  checkEndpoint,
  endpointCheckError,
  endpointCheckProblemsIn,
  endpointHost,
  endpointProblems,
  type EndpointCheck,
  type LoadBalancerFacts,
} from "../../../infra/providers/api-load-balancer";
import { parseGetent } from "../../../orchestrator/adopt/endpoint";

const ELB = "kubeone-api-lb-1529814937.eu-central-1.elb.amazonaws.com";
const classic: LoadBalancerFacts = { name: "classic ELB kubeone-api-lb", dnsNames: [ELB], addresses: [], members: {} };
const azure: LoadBalancerFacts = {
  name: "load balancer kubernetes (pool ApiServers)",
  dnsNames: ["kubeone-api.westeurope.cloudapp.azure.com"],
  addresses: ["20.79.14.201", "10.0.0.4"],
  members: {},
};
const check = (endpoint: string, resolved: EndpointCheck["resolved"] = { addresses: [] }): EndpointCheck => ({
  endpoint,
  resolved,
  resolvedOn: "cp-0",
});

describe("does the stack's load balancer serve controlPlaneEndpoint? (infra/providers/api-load-balancer.ts)", () => {
  it("reads the host of host:port, IPv6 in brackets, case and a trailing dot aside", () => {
    assert.equal(endpointHost("API.Example.com.:6443"), "api.example.com");
    assert.equal(endpointHost("[fd00::10]:6443"), "fd00::10");
    assert.equal(endpointHost("10.0.0.4:6443"), "10.0.0.4");
  });

  const served: [string, EndpointCheck, LoadBalancerFacts, string[]?][] = [
    ["the ELB's own DNS name", check(`${ELB}:6443`), classic],
    ["the ELB's DNS name, another case, a trailing dot", check(`${ELB.toUpperCase()}.:6443`), classic],
    [
      "a CNAME to the ELB (the node's canonical name)",
      check("api.prod.example.com:6443", { canonicalName: `${ELB}.`, addresses: ["3.120.7.1"] }),
      classic,
    ],
    [
      "an alias record: the name's addresses are the ELB's",
      check("api.prod.example.com:6443", { addresses: ["3.120.7.1", "18.194.3.2"] }),
      classic,
      ["18.194.3.2", "3.66.1.9"],
    ],
    ["the frontend's public address", check("20.79.14.201:6443"), azure],
    ["the frontend's private address", check("10.0.0.4:6443"), azure],
    ["the public address's Azure DNS name", check("kubeone-api.westeurope.cloudapp.azure.com:6443"), azure],
    ["a private DNS record for the frontend", check("api.prod.internal:6443", { addresses: ["10.0.0.4"] }), azure],
  ];
  for (const [what, c, lb, lbAddresses] of served)
    it(`served: ${what}`, () => assert.deepEqual(endpointProblems(c, lb, lbAddresses), []));

  const refused: [string, EndpointCheck, LoadBalancerFacts, RegExp][] = [
    [
      "another ELB's DNS name",
      check("other-api-lb-7.eu-central-1.elb.amazonaws.com:6443", { addresses: ["3.9.9.9"] }),
      classic,
      /other-api-lb-7.*is not served by classic ELB kubeone-api-lb \(kubeone-api-lb-1529814937.*cp-0 resolves it to 3\.9\.9\.9\)/,
    ],
    [
      "a name whose CNAME leads elsewhere",
      check("api.prod.example.com:6443", { canonicalName: "elsewhere.example.net", addresses: ["192.0.2.7"] }),
      classic,
      /resolves it to elsewhere\.example\.net = 192\.0\.2\.7/,
    ],
    ["a name that does not resolve", check("api.prod.example.com:6443"), classic, /resolves it to nothing/],
    ["an address the frontend does not have", check("20.79.99.99:6443"), azure, /20\.79\.99\.99:6443.*an address/],
    [
      "a load balancer with nothing in front (a target group of no NLB)",
      check(`${ELB}:6443`),
      { name: "target group api (of no load balancer)", dnsNames: [], addresses: [], members: {} },
      /not served by target group api \(of no load balancer\) \(no DNS name or address/,
    ],
  ];
  for (const [what, c, lb, message] of refused)
    it(`refused: ${what}`, () => {
      const problems = endpointProblems(c, lb);
      assert.equal(problems.length, 1);
      assert.match(problems[0], message);
      assert.match(problems[0], /Name the load balancer that serves it/);
    });

  it("refuses every adopted node the load balancer does not hold, by name, and only those", () => {
    const problems = endpointProblems(check(`${ELB}:6443`), { ...classic, members: { a: true, b: false, c: false } });
    assert.deepEqual(
      problems.map((p) => p.split("'")[0]),
      ["b", "c"],
    );
  });

  it("resolves the load balancer's names only for an endpoint that may be an alias of it", async () => {
    const asked: string[] = [];
    const resolve = async (name: string) => {
      asked.push(name);
      return ["18.194.3.2"];
    };
    assert.deepEqual(await checkEndpoint(check(`${ELB}:6443`), classic, resolve), []);
    assert.deepEqual(asked, [], "its own name needs no lookup");
    assert.deepEqual(await checkEndpoint(check("api.prod.example.com:6443"), classic, resolve), [
      endpointProblems(check("api.prod.example.com:6443"), classic)[0],
    ]);
    assert.deepEqual(asked, [], "an endpoint that resolves to nothing meets no address");
    assert.deepEqual(
      await checkEndpoint(check("api.prod.example.com:6443", { addresses: ["18.194.3.2"] }), classic, resolve),
      [],
    );
    assert.deepEqual(asked, [ELB]);
  });

  it("carries its problems through a failed engine run's output, once each", () => {
    const e = endpointCheckError(["first problem", "second: with a colon"]);
    const indented = e.message.split("\n").join("\n    ");
    const engine = `Updating (kubeone):\n    error: Running program failed:\n    ${indented}\n${e.message}`;
    assert.deepEqual(endpointCheckProblemsIn(engine), ["first problem", "second: with a colon"]);
    assert.deepEqual(endpointCheckProblemsIn("error: no credentials"), []);
  });

  it("reads what a node resolves (getent ahosts): the canonical name and each address once", () => {
    assert.deepEqual(
      parseGetent(
        `3.120.7.1       STREAM ${ELB}\n3.120.7.1       DGRAM  \n3.120.7.1       RAW    \n18.194.3.2      STREAM \n`,
      ),
      { canonicalName: ELB, addresses: ["3.120.7.1", "18.194.3.2"] },
    );
    assert.deepEqual(parseGetent(""), { addresses: [] });
    assert.deepEqual(parseGetent("fd00::10       STREAM api\n"), { canonicalName: "api", addresses: ["fd00::10"] });
  });
});
