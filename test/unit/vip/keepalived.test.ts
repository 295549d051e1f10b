// The keepalived renderer (infra/vip/keepalived.ts): the VRRP rules that make the VIP follow
// add-first replacement, keepalived's own check of the rendered configuration, the track
// scripts run against a real HTTP endpoint, and shellcheck on every rendered script.
import * as assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  INTERFACE_PLACEHOLDER,
  renderCheckScript,
  renderKeepalivedConfig,
  renderKeepalivedReleaseScript,
  renderKeepalivedSetupScript,
  renderNotifyScript,
  STATE_FILE,
  vrrpPriority,
  type VipNode,
  type VipSettings,
} from "../../../infra/vip/keepalived";
import { bash, definitionsOf, shellcheck } from "../kubeadm/shell";

const vip: VipSettings = { address: "10.0.0.100", virtualRouterId: 51 };
const node: VipNode = {
  name: "prod-cp-4",
  address: "10.0.0.14",
  generation: 4,
  check: { kind: "apiserver", port: 6443 },
};

describe("keepalived for the API endpoint VIP (infra/vip/keepalived.ts)", () => {
  describe("configuration", () => {
    const conf = renderKeepalivedConfig(vip, node);

    it("never lets a joining node take the VIP: BACKUP, nopreempt, ineligible until its endpoint is healthy", () => {
      assert.match(conf, /^\s+state BACKUP$/m);
      assert.match(conf, /^\s+nopreempt$/m);
      assert.match(conf, /vrrp_script molt_endpoint \{[\s\S]*init_fail[\s\S]*\}/);
      assert.doesNotMatch(conf, /state MASTER/);
    });

    it("after two nodes were MASTER at once, the one that stays is the last to send gratuitous ARPs", () => {
      // The yielding node adverts once more; the staying one answers a lower-priority advert
      // with gratuitous ARPs (on by default unless strict mode or lower_prio_no_advert).
      assert.match(conf, /^\s+vrrp_higher_prio_send_advert$/m);
      assert.doesNotMatch(conf, /vrrp_strict|lower_prio_no_advert|garp_lower_prio_repeat 0/);
    });

    it("drops a node whose endpoint fails (no weight: FAULT releases the VIP)", () => {
      assert.doesNotMatch(conf, /weight/);
      assert.match(conf, /track_script \{\s+molt_endpoint\s+\}/);
      assert.match(conf, /fall 2/);
      assert.match(conf, /rise 2/);
    });

    it("ranks newer nodes higher, within VRRP's 1-254", () => {
      assert.match(conf, /priority 140/);
      assert.ok(vrrpPriority(5) > vrrpPriority(4));
      for (const g of [1, 14, 15, 99, 100, 199, 12345]) {
        const p = vrrpPriority(g);
        assert.ok(p >= 1 && p <= 254, `generation ${g}: priority ${p}`);
      }
    });

    it("holds the VIP as a /32 on the interface of the node's own address, with the cluster's router id", () => {
      assert.match(conf, new RegExp(`10\\.0\\.0\\.100/32 dev ${INTERFACE_PLACEHOLDER}`));
      assert.match(conf, /virtual_router_id 51/);
      assert.match(conf, /advert_int 1/);
      assert.doesNotMatch(conf, /auth_pass|authentication/);
    });

    it("is accepted by keepalived itself (keepalived --config-test)", () => {
      const iface = spawnSync("ip", ["-o", "link", "show"], { encoding: "utf8" })
        .stdout.split("\n")
        .filter((l) => /<[^>]*MULTICAST/.test(l))
        .map((l) => /^\d+: ([^:@]+)[:@]/.exec(l)?.[1])
        .find((n) => n && n !== "lo");
      assert.ok(iface, "a multicast-capable interface to render for");
      const dir = mkdtempSync(join(tmpdir(), "molt-keepalived-"));
      try {
        const check = join(dir, "check.sh");
        writeFileSync(check, renderCheckScript(node.check), { mode: 0o700 });
        const file = join(dir, "keepalived.conf");
        writeFileSync(
          file,
          conf.replaceAll(INTERFACE_PLACEHOLDER, iface!).replace(/script "[^"]+"/, `script "${check}"`),
        );
        const r = spawnSync("keepalived", ["--config-test", "--use-file", file], { encoding: "utf8" });
        assert.ok(!r.error, "keepalived is installed (tools/setup.sh installs it)");
        assert.equal(r.status, 0, r.stdout + r.stderr);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("refuses bad settings with what is wrong", () => {
      assert.throws(() => renderKeepalivedConfig({ ...vip, address: "10.0.0.300" }, node), /not an IPv4 address/);
      assert.throws(() => renderKeepalivedConfig({ ...vip, virtualRouterId: 0 }, node), /1-255/);
      assert.throws(() => renderKeepalivedConfig({ ...vip, virtualRouterId: 256 }, node), /1-255/);
      assert.throws(() => renderKeepalivedConfig({ ...vip, advertIntervalSeconds: 0 }, node), /advertIntervalSeconds/);
      assert.throws(() => renderKeepalivedConfig(vip, { ...node, address: "10.0.0.100" }), /as its own address/);
      assert.throws(() => renderKeepalivedConfig(vip, { ...node, name: "Bad_Name" }), /DNS-1123/);
      assert.throws(() => renderKeepalivedConfig(vip, { ...node, address: "fe80::1" }), /not an IPv4 address/);
    });
  });

  describe("track scripts", () => {
    let server: Server;
    let port = 0;
    let reply: { status: number; body: string } = { status: 200, body: "" };
    before(async () => {
      server = createServer((_req, res) => res.writeHead(reply.status).end(reply.body));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      port = (server.address() as AddressInfo).port;
    });
    after(() => server.close());

    // Asynchronously: the endpoint answers from this process's event loop.
    const runCheck = (p = port) =>
      new Promise<number | null>((resolve) =>
        spawn("bash", ["-c", renderCheckScript({ kind: "etcd", metricsPort: p })], { stdio: "ignore" }).on(
          "close",
          resolve,
        ),
      );

    it("etcd: eligible only while the member reports itself healthy", async () => {
      reply = { status: 200, body: '{"health":"true","reason":""}' };
      assert.equal(await runCheck(), 0);
      reply = { status: 503, body: '{"health":"false","reason":"RAFT NO LEADER"}' };
      assert.notEqual(await runCheck(), 0);
      reply = { status: 200, body: '{"health":"false"}' };
      assert.notEqual(await runCheck(), 0);
    });

    it("etcd: not eligible when nothing answers", async () => {
      assert.notEqual(await runCheck(1), 0);
    });

    it("apiserver: /readyz of the local API server, verified with the cluster CA under kubeadm's name", async () => {
      // A CA and a serving certificate like kubeadm's: SAN "kubernetes", not 127.0.0.1.
      const dir = mkdtempSync(join(tmpdir(), "molt-readyz-"));
      const ssl = (...args: string[]) => spawnSync("openssl", args, { cwd: dir, encoding: "utf8" });
      ssl(
        ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
        ...["-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=kubernetes-ca", "-days", "1"],
      );
      ssl(
        ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "srv.key"],
        ...["-out", "srv.csr", "-subj", "/CN=kube-apiserver"],
      );
      writeFileSync(join(dir, "san.ext"), "subjectAltName=DNS:kubernetes,DNS:kubernetes.default,IP:10.96.0.1\n");
      ssl(
        ...["x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"],
        ...["-out", "srv.crt", "-days", "1", "-extfile", "san.ext"],
      );
      let ready = true;
      const https = await import("node:https");
      const { readFileSync } = await import("node:fs");
      const api = https.createServer(
        { key: readFileSync(join(dir, "srv.key")), cert: readFileSync(join(dir, "srv.crt")) },
        (req, res) => res.writeHead(req.url === "/readyz" && ready ? 200 : 500).end(ready ? "ok" : "not ready"),
      );
      await new Promise<void>((r) => api.listen(0, "127.0.0.1", r));
      try {
        const apiPort = (api.address() as AddressInfo).port;
        const script = renderCheckScript({ kind: "apiserver", port: apiPort }).replace(
          "/etc/kubernetes/pki/ca.crt",
          join(dir, "ca.crt"),
        );
        const check = () =>
          new Promise<number | null>((resolve) =>
            spawn("bash", ["-c", script], { stdio: "ignore" }).on("close", resolve),
          );
        assert.equal(await check(), 0, "a ready API server makes the node eligible");
        ready = false;
        assert.notEqual(await check(), 0, "a failing /readyz makes it ineligible");
        assert.doesNotMatch(script, /--insecure|-k /);
        const noCa = renderCheckScript({ kind: "apiserver", port: apiPort }).replace(
          "/etc/kubernetes/pki/ca.crt",
          join(dir, "missing.crt"),
        );
        assert.notEqual(bash(noCa).status, 0, "no CA yet (before kubeadm): not eligible");
      } finally {
        api.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("both pass shellcheck", () => {
      assert.equal(shellcheck(renderCheckScript({ kind: "etcd", metricsPort: 2381 })), "");
      assert.equal(shellcheck(renderCheckScript({ kind: "apiserver", port: 6443 })), "");
    });
  });

  describe("notify script", () => {
    // It travels inside the set-up script as a constant, where shellcheck on the set-up script
    // does not read it: checked and run on its own.
    it("passes shellcheck and records the state keepalived passes (type, name, state, priority)", () => {
      const script = renderNotifyScript();
      assert.equal(shellcheck(script), "");
      const dir = mkdtempSync(join(tmpdir(), "molt-notify-"));
      try {
        const file = join(dir, "run", "vrrp-state");
        const local = script.replace(`readonly STATE_FILE='${STATE_FILE}'`, `readonly STATE_FILE='${file}'`);
        assert.notEqual(local, script, "the state file is a constant of the script");
        for (const state of ["BACKUP", "MASTER", "FAULT"]) {
          const r = spawnSync("bash", ["--norc", "-c", local, "notify", "INSTANCE", "VI_API", state, "140"], {
            encoding: "utf8",
          });
          assert.equal(r.status, 0, r.stderr);
          assert.equal(readFileSync(file, "utf8"), `${state}\n`);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe("set-up and release scripts", () => {
    const setups = (["systemd", "process"] as const).flatMap((runMode) =>
      (["packages", "image"] as const).map((install) => ({
        runMode,
        install,
        script: renderKeepalivedSetupScript({ vip, node, runMode, install }),
      })),
    );

    for (const s of setups)
      it(`set-up (${s.runMode}, ${s.install}) passes shellcheck and checks the config before using it`, () => {
        assert.equal(shellcheck(s.script), "");
        assert.match(s.script, /keepalived --config-test --use-file "\$KEEPALIVED_CONF\.tmp"/);
        assert.ok(s.script.indexOf("--config-test") < s.script.indexOf('mv "$KEEPALIVED_CONF.tmp"'));
      });

    for (const action of ["release", "resume"] as const)
      it(`${action} passes shellcheck`, () => {
        assert.equal(shellcheck(renderKeepalivedReleaseScript(vip, action)), "");
      });

    it("finds the interface of the node's own address, and whether this node holds the VIP", () => {
      const ipOutput = [
        "1: lo    inet 127.0.0.1/8 scope host lo",
        "2: ens192    inet 10.0.0.14/24 brd 10.0.0.255 scope global ens192",
        "2: ens192    inet 10.0.0.100/32 scope global ens192",
      ].join("\\n");
      const defs = definitionsOf(setups[0].script);
      const fake = `ip() { printf '${ipOutput}\\n'; }`;
      assert.equal(bash(`${defs}\n${fake}\ninterface_of 10.0.0.14`).stdout.trim(), "ens192");
      assert.equal(bash(`${defs}\n${fake}\ninterface_of 10.0.0.1`).stdout.trim(), "");
      assert.equal(bash(`${defs}\n${fake}\nholds_vip`).status, 0);
      const notHeld = `ip() { printf '2: ens192    inet 10.0.0.14/24 scope global ens192\\n'; }`;
      assert.notEqual(bash(`${defs}\n${notHeld}\nholds_vip`).status, 0);
    });

    it("refuses to run without keepalived when the image must carry it, saying so", () => {
      const image = setups.find((s) => s.install === "image" && s.runMode === "systemd")!.script;
      const r = bash(`${definitionsOf(image)}\ncommand() { return 1; }\ninstall_or_verify_keepalived`);
      assert.notEqual(r.status, 0);
      assert.match(r.stderr, /keepalived is not installed on prod-cp-4: bake it into the image/);
    });
  });
});
