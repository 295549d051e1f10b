// The lab's cloud-like load balancer against a real HAProxy on loopback (no lab: two TCP
// listeners stand in for API servers): a new server is down until it passes its checks, what
// the checks learnt survives a reload, a deregistered server drains for the delay and then is
// unused, and it can be put back. A few seconds; root (lb-impl's attach asserts it).
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil } from "../../lib/poll";
import { adminSocketHolders, attach, detach, labTargets, render, setDeregistered } from "../../infra/lab/lb-impl";
import { labLbInputs, type LabLbInputs } from "../../infra/lab/lb";

describe("the lab's cloud-like load balancer on a real HAProxy (infra/lab/lb-impl.ts)", function () {
  this.timeout(60_000);
  let root: string;
  let lb: LabLbInputs;
  const listeners: Server[] = [];
  const dir = () => join(root, "labs", "t99", "lb");
  const nodes = [
    { name: "n1", address: "127.0.0.1" },
    { name: "n2", address: "127.0.0.2" },
  ];
  const listen = (port: number) =>
    new Promise<number>((ok) => {
      const s = createServer((c) => c.end()).listen(port, "127.0.0.1", () =>
        ok((s.address() as { port: number }).port),
      );
      listeners.push(s);
    });
  const stateOf = async (node: string) => {
    const t = (await labTargets(lb, nodes))[node];
    return "state" in t ? t.state : `error: ${t.error}`;
  };
  const until = (node: string, state: string, what: string) =>
    pollUntil(async () => ((await stateOf(node)) === state ? true : undefined), {
      what,
      deadlineMs: 15_000,
      intervalMs: 100,
      maxIntervalMs: 200,
    });

  before(async function () {
    if (process.getuid?.() !== 0) throw new Error("run as root (the lab's load balancer asserts it)");
    root = mkdtempSync(join(tmpdir(), "molt-lab-lb-"));
    lb = {
      ...labLbInputs(
        {
          lab: "t99",
          labRoot: root,
          bridge: "unused",
          subnet: "127.0.0.0/24",
          lbPort: 0,
          lbHealthCheck: {
            intervalSeconds: 1,
            unhealthyThreshold: 3,
            healthyThreshold: 2,
            deregistrationDelaySeconds: 2,
          },
        },
        false,
      ),
      bind: "127.0.0.1",
      port: 16999,
    };
    mkdirSync(join(dir(), "servers"), { recursive: true });
    writeFileSync(join(dir(), "haproxy.cfg"), render(dir(), lb));
    execFileSync("haproxy", ["-W", "-D", "-f", join(dir(), "haproxy.cfg"), "-p", join(dir(), "haproxy.pid")], {
      stdio: "ignore",
    });
    // A reload signalled before the master is up is lost (lb-impl's createLb waits likewise).
    await pollUntil(async () => (adminSocketHolders(dir()).length === 1 ? true : undefined), {
      what: "HAProxy's worker to listen on its admin socket",
      deadlineMs: 15_000,
    });
  });
  after(() => {
    try {
      process.kill(Number(readFileSync(join(dir(), "haproxy.pid"), "utf8").split("\n")[0]));
    } catch {
      /* not started */
    }
    listeners.forEach((s) => s.close());
    rmSync(root, { recursive: true, force: true });
  });

  it("starts a new server down and counts it healthy only after its checks pass", async () => {
    const port = await listen(0);
    await attach({ lb, server: "n1", address: "127.0.0.1", port });
    assert.equal(await stateOf("n1"), "unhealthy", "down until healthyThreshold checks pass");
    await until("n1", "healthy", "n1 to pass two checks");
  });

  it("keeps what the checks learnt across a reload (another attachment)", async () => {
    await attach({ lb, server: "n2", address: "127.0.0.2", port: 1 });
    assert.equal(await stateOf("n1"), "healthy");
    assert.equal(await stateOf("n2"), "unhealthy");
  });

  it("drains a deregistered server for the delay, then reports it unused; it can be put back", async () => {
    await setDeregistered(lb, nodes[0], true);
    assert.equal(await stateOf("n1"), "draining");
    await until("n1", "unused", "the deregistration delay to pass");
    await setDeregistered(lb, nodes[0], false);
    assert.equal(await stateOf("n1"), "healthy");
    await detach({ lb, server: "n1", address: "127.0.0.1", port: 0 });
    assert.equal(await stateOf("n1"), "unused");
  });
});
