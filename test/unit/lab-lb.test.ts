// The lab's HAProxy as a cloud-like load balancer (infra/lab/lb-impl.ts): its configuration in
// both modes, and each node's target as the running HAProxy (a fake admin socket here) and the
// deregistration records say it, in AWS's words.
import * as assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { labDrainSeconds, labTargets, masterPid, render, runningMaster } from "../../infra/lab/lb-impl";
import { labLbDiff, labLbInputs, labLbSourceAddress, labLbTargetPort, type LabLbInputs } from "../../infra/lab/lb";
import { etcdRefusalRule } from "../../infra/lab/machine-impl";
import { parseSubnet } from "../../infra/lab/host";
import type { LabSettings } from "../../infra/lab/settings";

const HC = { intervalSeconds: 10, unhealthyThreshold: 3, healthyThreshold: 2, deregistrationDelaySeconds: 15 };

describe("the lab's load balancer (infra/lab/lb-impl.ts)", () => {
  let root: string;
  let server: Server | undefined;
  const settings = (o: Partial<LabSettings> = {}): LabSettings => ({
    lab: "t99",
    labRoot: root,
    bridge: "moltbr-t99",
    subnet: "10.77.199.0/24",
    lbPort: 6443,
    ...o,
  });
  const dirOf = (i: LabLbInputs) => join(i.labRoot, "labs", i.lab, "lb");
  const attachFiles = (i: LabLbInputs, servers: Record<string, string>) => {
    mkdirSync(join(dirOf(i), "servers"), { recursive: true });
    for (const [n, t] of Object.entries(servers)) writeFileSync(join(dirOf(i), "servers", n), t);
    writeFileSync(join(dirOf(i), "haproxy.cfg"), render(dirOf(i), i));
  };
  /** A stand-in for HAProxy's admin socket answering `show servers state apiservers`. */
  const admin = (i: LabLbInputs, lines: string[]) =>
    new Promise<void>((ok) => {
      server = createServer((c) =>
        c.once("data", () => c.end(["1", "# be_id be_name srv_id srv_name ...", ...lines, ""].join("\n"))),
      );
      server.listen(join(dirOf(i), "admin.sock"), ok);
    });

  beforeEach(() => (root = mkdtempSync(join(tmpdir(), "molt-lab-lb-"))));
  afterEach(async () => {
    await new Promise<void>((ok) => (server ? server.close(() => ok()) : ok()));
    server = undefined;
    rmSync(root, { recursive: true, force: true });
  });

  it("keeps today's quick checks and retries when no health check is configured", () => {
    const i = labLbInputs(settings());
    assert.equal(i.healthCheck, undefined);
    assert.equal(labLbTargetPort(labLbInputs(settings(), false)), 6443, "etcd alone: as before");
    attachFiles(i, { "t99-cp-1": "10.77.199.10:6443" });
    const cfg = render(dirOf(i), i);
    assert.match(cfg, /retries 2\n {2}option redispatch/);
    assert.match(
      cfg,
      /default-server check check-ssl verify none inter 1s fastinter 200ms downinter 200ms fall 2 rise 1/,
    );
    assert.match(cfg, /server t99-cp-1 10\.77\.199\.10:6443\n/);
    assert.doesNotMatch(cfg, /server-state-file|disabled|weight/);
    assert.equal(labDrainSeconds(i), 2);
  });

  it("molt:lab.lbHealthCheck: slow checks, no retry elsewhere, state kept across reloads, new servers down", () => {
    const i = labLbInputs(settings({ lbHealthCheck: HC }));
    attachFiles(i, { "t99-cp-1": "10.77.199.10:6443", "t99-cp-4": "10.77.199.13:6443" });
    mkdirSync(join(dirOf(i), "pending"));
    writeFileSync(join(dirOf(i), "pending", "t99-cp-4"), "");
    mkdirSync(join(dirOf(i), "deregistered"));
    writeFileSync(join(dirOf(i), "deregistered", "t99-cp-1"), String(Date.now()));
    const cfg = render(dirOf(i), i);
    assert.match(cfg, /retries 0\n {2}load-server-state-from-file global/);
    assert.doesNotMatch(cfg, /redispatch/);
    assert.match(cfg, /server-state-file .*\/labs\/t99\/lb\/state/);
    assert.match(cfg, /option httpchk GET \/readyz/);
    assert.match(cfg, /default-server check check-ssl verify none inter 10s fall 3 rise 2/);
    assert.match(cfg, /server t99-cp-1 10\.77\.199\.10:6443 weight 0\n/);
    assert.match(cfg, /server t99-cp-4 10\.77\.199\.13:6443 disabled\n/);
    assert.equal(labDrainSeconds(i), 15 + 10 * 3);
    // etcd alone: the load balancer serves etcd's client port with a TCP check.
    const e = labLbInputs(settings({ lbHealthCheck: HC }), false);
    assert.equal(e.serves, "etcd");
    assert.equal(labLbTargetPort(e), 2379);
    const ecfg = render(dirOf(e), e);
    assert.doesNotMatch(ecfg, /httpchk|check-ssl/);
    assert.match(ecfg, /default-server check inter 10s fall 3 rise 2/);
  });

  it("serving etcd, connects from its own address, which the machines admit to etcd's ports", () => {
    // The machines refuse 2379-2380 from the gateway (the host, outside the control plane):
    // checks from there never pass, and no etcd-only node ever counts healthy.
    const e = labLbInputs(settings({ lbHealthCheck: HC }), false);
    const refused = etcdRefusalRule(parseSubnet(e.subnet).gateway);
    const from = refused[refused.indexOf("from") + 1];
    assert.equal(from, "10.77.199.1");
    const source = labLbSourceAddress(e);
    assert.ok(source, "an etcd-serving load balancer has an address of its own");
    assert.notEqual(source, from);
    // In the subnet, outside the machines' range (.10-.249).
    const host = Number(/^10\.77\.199\.(\d+)$/.exec(source)?.[1]);
    assert.ok(host > 1 && host < 10, source);
    attachFiles(e, { "t99-cp-1": "10.77.199.10:2379" });
    assert.match(render(dirOf(e), e), new RegExp(`backend apiservers\n {2}balance roundrobin\n {2}source ${source}\n`));
    // Serving kube-apiservers (6443, not refused), or without slow checks: from the gateway as before.
    for (const i of [labLbInputs(settings({ lbHealthCheck: HC })), labLbInputs(settings(), false)]) {
      assert.equal(labLbSourceAddress(i), undefined);
      assert.doesNotMatch(render(dirOf(i), i), /source/);
    }
  });

  it("reports each node's target in AWS's words", async () => {
    const i = labLbInputs(settings({ lbHealthCheck: HC }));
    attachFiles(i, {
      "t99-cp-1": "10.77.199.10:6443",
      "t99-cp-2": "10.77.199.11:6443",
      "t99-cp-3": "10.77.199.12:6443",
      "t99-cp-4": "10.77.199.13:6443",
      "t99-cp-5": "10.77.199.14:6443",
      owners: "10.77.199.20:6443",
    });
    mkdirSync(join(dirOf(i), "deregistered"));
    const now = 1_000_000;
    writeFileSync(join(dirOf(i), "deregistered", "t99-cp-1"), String(now - 5_000));
    writeFileSync(join(dirOf(i), "deregistered", "t99-cp-2"), String(now - 16_000));
    // be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight ...
    await admin(i, [
      "3 apiservers 1 t99-cp-1 10.77.199.10 2 0 0 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0",
      "3 apiservers 2 t99-cp-2 10.77.199.11 0 0 0 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0",
      // Started disabled, then enabled: 0x04 stays set, the server is in service.
      "3 apiservers 3 t99-cp-3 10.77.199.12 2 4 1 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0",
      "3 apiservers 4 t99-cp-4 10.77.199.13 0 0 1 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0",
      "3 apiservers 5 t99-cp-5 10.77.199.14 0 5 1 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0",
      "3 apiservers 6 owners 10.77.199.20 2 0 1 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0",
    ]);
    const node = (name: string, address: string) => ({ name, address });
    const t = await labTargets(
      i,
      [
        node("t99-cp-1", "10.77.199.10"),
        node("t99-cp-2", "10.77.199.11"),
        node("t99-cp-3", "10.77.199.12"),
        node("t99-cp-4", "10.77.199.13"),
        node("t99-cp-5", "10.77.199.14"),
        node("adopted-1", "10.77.199.20"),
        node("t99-cp-9", "10.77.199.19"),
      ],
      now,
    );
    assert.deepEqual(t, {
      "t99-cp-1": { state: "draining", detail: "10s of the deregistration delay left" },
      "t99-cp-2": { state: "unused", detail: "deregistered and drained" },
      "t99-cp-3": { state: "healthy" },
      "t99-cp-4": { state: "unhealthy", detail: "failing its health check" },
      "t99-cp-5": { state: "initial", detail: "not yet enabled" },
      // An owner's HAProxy names its servers otherwise: found by address.
      "adopted-1": { state: "healthy" },
      "t99-cp-9": { state: "unused", detail: "not attached" },
    });
  });

  it("an admin socket that accepts and never answers costs an observe pass 5 s, not forever", async function () {
    this.timeout(15_000);
    const i = labLbInputs(settings({ lbHealthCheck: HC }));
    attachFiles(i, { "t99-cp-1": "10.77.199.10:6443" });
    await new Promise<void>((ok) => {
      server = createServer((c) => void c.resume()); // reads, never answers: a worker stuck in a reload
      server.listen(join(dirOf(i), "admin.sock"), ok);
    });
    const t = Date.now();
    const read = await labTargets(i, [{ name: "t99-cp-1", address: "10.77.199.10" }]);
    const ms = Date.now() - t;
    assert.ok(ms >= 4_900 && ms < 8_000, `answered after ${ms} ms`);
    assert.deepEqual(read, { "t99-cp-1": { state: "initial", detail: "not yet loaded" } }, "nothing read: not healthy");
  });

  it("a deregistration the running HAProxy has not loaded yet is still draining", async () => {
    const i = labLbInputs(settings({ lbHealthCheck: { ...HC, deregistrationDelaySeconds: 0 } }));
    attachFiles(i, { "t99-cp-1": "10.77.199.10:6443" });
    mkdirSync(join(dirOf(i), "deregistered"));
    writeFileSync(join(dirOf(i), "deregistered", "t99-cp-1"), "0");
    await admin(i, ["3 apiservers 1 t99-cp-1 10.77.199.10 2 0 1 1 3 6 3 4 6 0 0 0 - 6443 - 0 0 - - 0"]);
    assert.deepEqual(await labTargets(i, [{ name: "t99-cp-1", address: "10.77.199.10" }]), {
      "t99-cp-1": { state: "draining", detail: "deregistration not yet loaded" },
    });
  });

  it("its master in a reload's gap (pid file removed, not yet rewritten) is awaited, not taken for none", async () => {
    // Seen once in a bench run: a detach read the pid file between HAProxy's removal and its
    // rewrite, and failed with ENOENT. Taking that gap for "no master" would start a second one.
    const dir = dirOf(labLbInputs(settings()));
    mkdirSync(dir, { recursive: true });
    assert.equal(masterPid(dir), undefined);
    assert.equal(await runningMaster(dir), undefined, "no pid file and no admin socket: no master");
    await new Promise<void>((ok) => {
      server = createServer((c) => c.once("data", () => c.end("Name: HAProxy\nVersion: 2.6.12\n")));
      server.listen(join(dir, "admin.sock"), ok);
    });
    assert.equal(masterPid(dir), undefined);
    const found = runningMaster(dir);
    // The master writing its pid file again, a moment later.
    setTimeout(() => writeFileSync(join(dir, "haproxy.pid"), `${process.pid}\n`), 50);
    assert.equal(await found, process.pid);
  });

  it("a load balancer that is not there is an error, not an empty answer", async () => {
    const i = labLbInputs(settings({ lbHealthCheck: HC }));
    await assert.rejects(labTargets(i, [{ name: "t99-cp-1", address: "10.77.199.10" }]), /does not exist/);
  });
});

describe("the lab load balancer's replacement (infra/lab/lb.ts diff)", () => {
  it("deletes the old one first: one directory, one pid file and one source address for both", () => {
    const base = labLbInputs({ lab: "t9", labRoot: "/x", bridge: "br9", subnet: "10.77.9.0/24", lbPort: 0 }, false);
    assert.deepEqual(labLbDiff(base, { ...base, port: base.port + 1 }), {
      changes: true,
      replaces: ["port"],
      deleteBeforeReplace: true,
    });
    assert.equal(labLbDiff(base, { ...base }).changes, false);
  });
});
