// Joining an adopted cluster's keepalived VRRP group (issue #29 item 8): keepalived.conf as
// KubeOne's vSphere example writes it, parsed by the core (orchestrator/core/keepalived-conf.ts);
// what adoption refuses and why; the priority that never steals the VIP; the group's password
// reaching a new node only on stdin and never in a message; the hand-off rule; the release of
// an owner's keepalived.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  joinPriorityFloor,
  parseKeepalivedConf,
  vrrpGroupOf,
  vrrpGroupProblems,
  type VrrpGroup,
} from "../../../orchestrator/core/keepalived-conf";
import { vipHandOff } from "../../../orchestrator/core/plan/vip";
import { vipGroupChecks } from "../../../orchestrator/adopt/vip-checks";
import type { AdoptionHost } from "../../../orchestrator/adopt/input";
import { redactText } from "../../../orchestrator/report/redact";
import { groupAuthOf } from "../../../infra/vip/group-auth-impl";
import {
  AUTH_PLACEHOLDER,
  INTERFACE_PLACEHOLDER,
  renderKeepalivedConfig,
  renderKeepalivedReleaseScript,
  renderKeepalivedSetupScript,
  vrrpPriority,
  type VipSettings,
} from "../../../infra/vip/keepalived";
import { kubeoneKeepalivedConf } from "../../support/kubeone-vip";
import { bash, definitionsOf, shellcheck } from "../kubeadm/shell";

const VIP = "10.0.0.100";
const PASS = "Xy7Qm2Lp";
const kubeone = (master: boolean) =>
  kubeoneKeepalivedConf({ address: VIP, virtualRouterId: 42, authPass: PASS }, { master, iface: "ens192" });
const intent: VipSettings = { address: VIP, virtualRouterId: 42 };

const groupOf = (text: string, host = "10.0.0.11"): VrrpGroup => {
  const r = vrrpGroupOf(text, VIP, host);
  assert.ok("group" in r, r.problems.join("; "));
  return r.group;
};
const problemsOf = (text: string) => {
  const r = vrrpGroupOf(text, VIP, "10.0.0.11");
  assert.ok(!("group" in r), "refused");
  return r.problems;
};

describe("an adopted keepalived VRRP group (core/keepalived-conf.ts)", () => {
  describe("keepalived.conf as KubeOne's vSphere example writes it", () => {
    it("gives the group molt's nodes must speak: router id, advert interval, interface, authentication", () => {
      const g = groupOf(kubeone(true));
      assert.deepEqual(g, {
        virtualRouterId: 42,
        advertIntervalSeconds: 1,
        interface: "ens192",
        // weight -2 lowers it when the check fails; it never raises it: 101 is its top.
        effectivePriority: 101,
        auth: { type: "PASS", pass: PASS },
      });
      assert.equal(groupOf(kubeone(false)).effectivePriority, 100);
    });

    it("reads comments, quoting, prefixes and positive track-script weights the way keepalived does", () => {
      const conf = parseKeepalivedConf(`! Configuration File for keepalived
vrrp_script chk { script "/bin/true"  # inline comment
  weight 5 }
vrrp_instance "VI_API" {
  virtual_router_id 7   ! comment
  priority 150
  advert_int 2
  virtual_ipaddress {
    ${VIP}/24 dev eth0 label eth0:1
  }
  track_script {
    chk
    other weight 3
  }
}`);
      assert.equal(conf.instances.length, 1);
      const i = conf.instances[0];
      assert.deepEqual(
        { name: i.name, id: i.virtualRouterId, p: i.priority, a: i.advertIntervalSeconds, addrs: i.addresses },
        { name: "VI_API", id: 7, p: 150, a: 2, addrs: [VIP] },
      );
      assert.equal(i.positiveWeight, 8, "a weight that rises while the script succeeds counts toward the top");
      assert.equal(i.auth, undefined);
    });

    it("molt's own rendered configuration is a group too (no authentication unless it carries one)", () => {
      const conf = renderKeepalivedConfig(intent, {
        name: "cp-4",
        address: "10.0.0.14",
        generation: 4,
        check: { kind: "etcd", metricsPort: 2381 },
      })
        .replaceAll(INTERFACE_PLACEHOLDER, "eth0")
        .replace(AUTH_PLACEHOLDER, "");
      const g = groupOf(conf);
      assert.equal(g.virtualRouterId, 42);
      assert.equal(g.auth, undefined);
      assert.equal(g.effectivePriority, vrrpPriority(4));
    });
  });

  describe("bad input: refused, saying what and what to do, never showing the password", () => {
    const two = `${kubeone(true)}
vrrp_instance VI_2 {
  virtual_router_id 43
  virtual_ipaddress {
    10.0.0.200
  }
}`;
    const rows: [string, string, RegExp][] = [
      [
        "two VRRP instances",
        two,
        /runs 2 VRRP instances \(VI_1, VI_2\).*stopping keepalived.*would stop the others too/,
      ],
      [
        "the VIP not in the configuration",
        kubeone(true).replace(VIP, "10.0.0.99"),
        /has no vrrp_instance with the API endpoint VIP 10\.0\.0\.100 .*\(it serves VI_1: 10\.0\.0\.99\).*check molt:apiEndpoint\.address/,
      ],
      [
        "no vrrp_instance at all",
        "global_defs {\n}\n",
        /has no vrrp_instance with the API endpoint VIP .*\(it has no vrrp_instance\)/,
      ],
      [
        "unicast VRRP (unicast_peer)",
        kubeone(true).replace(
          "  track_script {",
          "  unicast_src_ip 10.0.0.11\n  unicast_peer {\n    10.0.0.12\n  }\n  track_script {",
        ),
        /uses unicast VRRP .*not support.*switch the group to multicast .*or serve the endpoint with a load balancer/,
      ],
      [
        "an include",
        `include /etc/keepalived/conf.d/*.conf\n${kubeone(true)}`,
        /includes other files \(\/etc\/keepalived\/conf\.d\/\*\.conf\)/,
      ],
      [
        "VRRP version 3",
        kubeone(true).replace("  state MASTER", "  version 3\n  state MASTER"),
        /speaks VRRP version 3.*set vrrp_version 2/,
      ],
      ["no virtual_router_id", kubeone(true).replace(/ {2}virtual_router_id 42\n/, ""), /has no virtual_router_id/],
    ];
    for (const [what, text, expected] of rows)
      it(what, () => {
        const problems = problemsOf(text);
        assert.match(problems.join("\n"), expected);
        assert.ok(
          problems.every((p) => p.startsWith("10.0.0.11: /etc/keepalived/keepalived.conf")),
          "names the host and file",
        );
        assert.ok(!problems.join("\n").includes(PASS), "the password is never shown");
      });
  });

  describe("the hosts' groups against the stack's molt:apiEndpoint", () => {
    const g = (o: Partial<VrrpGroup> = {}): VrrpGroup => ({ ...groupOf(kubeone(false)), ...o });
    const hosts = (...gs: VrrpGroup[]) => gs.map((group, i) => ({ host: `10.0.0.1${i + 1}`, group }));

    it("one group, the configured one: nothing to say", () => {
      assert.deepEqual(vrrpGroupProblems(hosts(g({ effectivePriority: 101 }), g(), g()), intent), []);
    });
    it("another virtual_router_id than the stack's: names the value to set", () => {
      const p = vrrpGroupProblems(hosts(g(), g()), { ...intent, virtualRouterId: 43 });
      assert.match(p.join(), /virtual_router_id 42: set molt:apiEndpoint\.virtualRouterId: 42/);
    });
    it("hosts in different groups, with different adverts", () => {
      const p = vrrpGroupProblems(hosts(g(), g({ virtualRouterId: 9, advertIntervalSeconds: 3 })), intent);
      assert.match(p.join("\n"), /different virtual_router_ids \(10\.0\.0\.11: 42, 10\.0\.0\.12: 9\)/);
      assert.match(p.join("\n"), /different advert_int/);
    });
    it("another advert interval than the stack's: names the value to set", () => {
      const p = vrrpGroupProblems(hosts(g({ advertIntervalSeconds: 3 })), intent);
      assert.match(p.join(), /set molt:apiEndpoint\.advertIntervalSeconds: 3/);
    });
    it("passwords that differ are compared, not shown", () => {
      const p = vrrpGroupProblems(hosts(g(), g({ auth: { type: "PASS", pass: "Other123" } })), intent);
      assert.match(p.join(), /authentication differs .*passwords compared, not shown/);
      assert.ok(!p.join().includes(PASS) && !p.join().includes("Other123"));
    });
    it("a group at priority 254 leaves molt's nodes no room above it", () => {
      assert.match(vrrpGroupProblems(hosts(g({ effectivePriority: 254 })), intent).join(), /reach priority 254/);
    });
  });

  describe("the priority of a node that joins: above every adopted node, so it never takes the VIP back", () => {
    it("KubeOne's 101/100: molt's nodes rank from 102, newer ones higher, within VRRP's 1-254", () => {
      const floor = joinPriorityFloor([101, 100, 100]);
      assert.equal(floor, 102);
      for (let gen = 1; gen < 200; gen++) {
        const p = vrrpPriority(gen, floor);
        assert.ok(p > 101 && p <= 254, `generation ${gen}: ${p}`);
      }
      assert.ok(vrrpPriority(5, floor) > vrrpPriority(4, floor));
      assert.match(
        renderKeepalivedConfig(
          { ...intent, priorityFloor: floor },
          {
            name: "cp-4",
            address: "10.0.0.14",
            generation: 4,
            check: { kind: "etcd", metricsPort: 2381 },
          },
        ),
        /priority 142/,
      );
    });
    it("without adopted members: molt's own range (100-240, as before)", () => {
      assert.equal(joinPriorityFloor([]), 100);
      assert.equal(vrrpPriority(4), 140);
      assert.equal(vrrpPriority(15), 100);
    });
    it("a floor near the top still gives a valid priority", () => {
      assert.equal(vrrpPriority(3, 250), 250);
      assert.throws(
        () =>
          renderKeepalivedConfig(
            { ...intent, priorityFloor: 255 },
            {
              name: "cp-4",
              address: "10.0.0.14",
              generation: 4,
              check: { kind: "etcd", metricsPort: 2381 },
            },
          ),
        /priorityFloor 255/,
      );
    });
  });

  describe("the group's password on its way to a new node", () => {
    it("is read from a member's keepalived.conf (KubeOne's or molt's) as TYPE PASSWORD, or nothing", () => {
      assert.equal(
        groupAuthOf(kubeone(false), { vip: VIP, virtualRouterId: 42, seed: { host: "10.0.0.12" } }),
        `PASS ${PASS}`,
      );
      const own = renderKeepalivedConfig(intent, {
        name: "cp-4",
        address: "10.0.0.14",
        generation: 4,
        check: { kind: "etcd", metricsPort: 2381 },
      });
      assert.equal(groupAuthOf(own, { vip: VIP, virtualRouterId: 42, seed: { host: "10.0.0.14" } }), "");
    });
    it("a member that runs another group for the VIP is refused, naming it, never the password", () => {
      assert.throws(
        () => groupAuthOf(kubeone(false), { vip: VIP, virtualRouterId: 7, seed: { host: "10.0.0.12" } }),
        (e: Error) =>
          /virtual_router_id 42, not molt:apiEndpoint\.virtualRouterId 7/.test(e.message) && !e.message.includes(PASS),
      );
    });

    const setup = renderKeepalivedSetupScript({
      vip: { ...intent, priorityFloor: 102 },
      node: { name: "cp-4", address: "10.0.0.14", generation: 4, check: { kind: "etcd", metricsPort: 2381 } },
      runMode: "process",
      install: "image",
    });
    it("never in the set-up script's text (the state keeps that in clear): it comes on stdin", () => {
      assert.ok(!setup.includes(PASS));
      assert.equal(shellcheck(setup), "");
      const defs = definitionsOf(setup);
      const block = bash(`${defs}\nauthentication_block`, `PASS ${PASS}\n`);
      assert.equal(block.status, 0, block.stderr);
      assert.equal(block.stdout, `  authentication {\n    auth_type PASS\n    auth_pass ${PASS}\n  }`);
      assert.equal(bash(`${defs}\nauthentication_block`, "").stdout, "", "a group without one: no block");
    });
    it("a password keepalived.conf cannot hold, or an unknown type, is refused without showing it", () => {
      const defs = definitionsOf(setup);
      for (const bad of ['PASS ab"cd1234', "PASS ab{cd}12", "PASS two words", "PASS ab'c1234", "PASS ab\\c1234"]) {
        const r = bash(`${defs}\nauthentication_block`, `${bad}\n`);
        assert.notEqual(r.status, 0, bad);
        assert.match(r.stderr, /auth_pass has characters molt cannot write/);
        assert.ok(!r.stderr.includes(bad.slice(5)), "not shown");
      }
      assert.match(bash(`${defs}\nauthentication_block`, "MD5 secret12\n").stderr, /unknown VRRP auth_type/);
    });
    it("with the block in place, keepalived itself accepts the configuration a new node writes", () => {
      const defs = definitionsOf(setup);
      const block = bash(`${defs}\nauthentication_block`, `PASS ${PASS}\n`).stdout;
      const conf = renderKeepalivedConfig(
        { ...intent, priorityFloor: 102 },
        {
          name: "cp-4",
          address: "10.0.0.14",
          generation: 4,
          check: { kind: "etcd", metricsPort: 2381 },
        },
      );
      const iface = spawnSync("ip", ["-o", "link", "show"], { encoding: "utf8" })
        .stdout.split("\n")
        .filter((l) => /<[^>]*MULTICAST/.test(l))
        .map((l) => /^\d+: ([^:@]+)[:@]/.exec(l)?.[1])
        .find((n) => n && n !== "lo");
      assert.ok(iface, "a multicast-capable interface to render for");
      const dir = mkdtempSync(join(tmpdir(), "molt-keepalived-auth-"));
      try {
        const file = join(dir, "keepalived.conf");
        writeFileSync(
          file,
          conf
            .replaceAll(INTERFACE_PLACEHOLDER, iface!)
            .replace(AUTH_PLACEHOLDER, block)
            .replace(/script "[^"]+"/, 'script "/bin/true"'),
        );
        const r = spawnSync("keepalived", ["--config-test", "--use-file", file], { encoding: "utf8" });
        assert.equal(r.status, 0, r.stdout + r.stderr);
        assert.deepEqual(groupOf(readFileSync(file, "utf8")).auth, { type: "PASS", pass: PASS });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

describe("adopt in VIP mode: the hosts' group (adopt/vip-checks.ts)", () => {
  const hosts: AdoptionHost[] = ["10.0.0.11", "10.0.0.12", "10.0.0.13"].map((address) => ({
    address,
    sshHost: address,
    sshPort: 22,
  }));
  const ip = (holds: boolean, a: string) =>
    `2: ens192    inet ${a}/24 brd 10.0.0.255 scope global ens192\n` +
    (holds ? `2: ens192    inet ${VIP}/32 scope global ens192\n` : "");
  const seen = (o: { holders?: number[]; conf?: (i: number) => string | undefined } = {}) =>
    new Map(
      hosts.map((h, i) => {
        const conf = o.conf ? o.conf(i) : kubeone(i === 0);
        return [
          h,
          { ...(conf !== undefined ? { conf } : {}), addresses: ip((o.holders ?? [0]).includes(i), h.address) },
        ];
      }),
    );

  it("records each host's priority, says what it found without the password (redacted from now on)", () => {
    const r = vipGroupChecks(hosts, seen(), intent);
    assert.deepEqual(r.problems, []);
    assert.deepEqual([...r.priorities.values()], [101, 100, 100]);
    assert.match(
      r.detail,
      /virtual_router_id 42 for 10\.0\.0\.100 on 3 hosts \(auth_type PASS, priorities 101\/100\/100\), held by 10\.0\.0\.11/,
    );
    assert.ok(!r.detail.includes(PASS));
    assert.equal(redactText(`keepalived said ${PASS}`), "keepalived said [redacted]");
  });
  it("a host without keepalived.conf: refused, pointing at loadBalancer mode for a gobetween-style LB", () => {
    const r = vipGroupChecks(hosts, seen({ conf: (i) => (i === 2 ? undefined : kubeone(i === 0)) }), intent);
    assert.match(
      r.problems.join(),
      /host 10\.0\.0\.13 has no readable \/etc\/keepalived\/keepalived\.conf.*mode loadBalancer/,
    );
  });
  it("no holder, or two: refused (the group must be settled before adoption)", () => {
    assert.match(
      vipGroupChecks(hosts, seen({ holders: [] }), intent).problems.join(),
      /no host holds the API endpoint VIP/,
    );
    assert.match(
      vipGroupChecks(hosts, seen({ holders: [0, 2] }), intent).problems.join(),
      /is on 10\.0\.0\.11 and 10\.0\.0\.13 at once/,
    );
  });
});

describe("the hand-off rule (core/plan/vip.ts vipHandOff)", () => {
  const obs = (holders: string[], states: Record<string, string> = {}, unobserved: string[] = []) => ({
    address: VIP,
    holders,
    unobserved,
    states,
  });
  const rows: [string, ReturnType<typeof obs>, boolean | undefined, string | RegExp][] = [
    ["the victim still holds it", obs(["kvip-cp-1"]), true, /kvip-cp-1 still holds/],
    ["no node holds it yet", obs([], {}, ["cp-5"]), true, /held by no node; not observed: cp-5/],
    ["two nodes hold it", obs(["cp-4", "cp-5"]), true, /held by cp-4 and cp-5/],
    ["the holder is not MASTER yet", obs(["cp-5"], { "cp-5": "BACKUP" }), true, /records BACKUP, not MASTER/],
    ["MASTER, not asked yet: ask", obs(["cp-5"], { "cp-5": "MASTER" }), undefined, "ask"],
    [
      "MASTER, but the endpoint did not answer through the VIP",
      obs(["cp-5"], { "cp-5": "MASTER" }),
      false,
      /not answered/,
    ],
    ["MASTER and answering: done", obs(["cp-5"], { "cp-5": "MASTER" }), true, "done:cp-5"],
    ["a holder that records no state (an adopted node), answering: done", obs(["kvip-cp-2"]), true, "done:kvip-cp-2"],
  ];
  for (const [what, v, answered, expected] of rows)
    it(what, () => {
      const h = vipHandOff(v, "kvip-cp-1", answered);
      if (expected === "ask") assert.ok(!h.done && h.ask);
      else if (typeof expected === "string") assert.deepEqual(h, { done: true, holder: expected.slice(5) });
      else assert.ok(!h.done && !h.ask && expected.test(h.why), JSON.stringify(h));
    });
});

describe("releasing an adopted node's own keepalived (infra/vip/keepalived.ts)", () => {
  const script = renderKeepalivedReleaseScript({ address: VIP }, "release", 2);
  const resume = renderKeepalivedReleaseScript({ address: VIP }, "resume", 2);
  const dir = mkdtempSync(join(tmpdir(), "molt-owner-keepalived-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const local = (s: string) =>
    definitionsOf(s)
      .replace("readonly OWNER_PIDFILE='/run/keepalived.pid'", `readonly OWNER_PIDFILE='${dir}/keepalived.pid'`)
      .replace("readonly OWNER_RECORD='/run/molt/owner-keepalived'", `readonly OWNER_RECORD='${dir}/record'`)
      .replace(/readonly RUN_MODE_FILE='[^']*'/, `readonly RUN_MODE_FILE='${dir}/none'`);
  const notHeld = "ip() { printf '2: eth0    inet 10.0.0.11/24 scope global eth0\\n'; }";
  const held =
    "ip() { printf '2: eth0    inet 10.0.0.11/24 scope global eth0\\n" +
    `2: eth0    inet ${VIP}/32 scope global eth0\\n'; }`;

  it("passes shellcheck", () => {
    assert.equal(shellcheck(script), "");
    assert.equal(shellcheck(resume), "");
  });
  it("systemd (KubeOne's unit): disabled and stopped, recorded for a resume", () => {
    const active = `systemctl() { echo "systemctl $*" >>'${dir}/calls'; return 0; }`;
    const r = bash(`${local(script)}\n${active}\n${notHeld}\nmain`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(readFileSync(`${dir}/calls`, "utf8"), /disable keepalived[\s\S]*stop --no-block keepalived/);
    assert.equal(readFileSync(`${dir}/record`, "utf8"), "systemd\n");
    assert.match(r.stderr, /the owner's keepalived stopped \(and disabled\)/);
  });
  it("no keepalived molt can stop while the node holds the VIP: refused, saying so", () => {
    rmSync(`${dir}/record`, { force: true });
    const r = bash(`${local(script)}\nsystemctl() { return 3; }\n${held}\nmain`);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /holds 10\.0\.0\.100, but no keepalived unit is active and .* names no keepalived/);
  });
  it("no keepalived and no VIP (a non-holder whose keepalived is already gone): nothing to do", () => {
    const r = bash(`${local(script)}\nsystemctl() { return 3; }\n${notHeld}\nmain`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /no keepalived runs here: nothing to release/);
  });
  it("a resume of what molt never stopped is refused", () => {
    rmSync(`${dir}/record`, { force: true });
    const r = bash(`${local(resume)}\nmain`);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /molt did not stop keepalived here/);
  });
});
