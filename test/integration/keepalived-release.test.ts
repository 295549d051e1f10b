// The VIP's release and resume scripts (infra/vip/keepalived.ts) run for real: the rendered
// set-up, release and resume scripts, a real keepalived, in a network namespace of the
// test's own with private /etc/keepalived and /run/molt. A keepalived told to stop gives
// the VIP away at once (its priority-0 advert, the address removed) but takes about 2 s
// more to exit; the release returns once the VIP left the node, and a resume waits for the
// old process's exit before it starts a new one.
import * as assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderKeepalivedReleaseScript, renderKeepalivedSetupScript } from "../../infra/vip/keepalived";

const VIP = "10.99.77.5";
const ADDRESS = "10.99.77.2";

describe("keepalived release and resume, for real in a network namespace (infra/vip/keepalived.ts)", function () {
  this.timeout(120_000);
  const ns = `molt-ka-${process.pid}`;
  const peer = `${ns}-peer`;
  let dir: string;
  const netnsPids = () =>
    spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).stdout.split("\n").filter(Boolean);

  before(function () {
    if (spawnSync("keepalived", ["--version"]).status !== 0) throw new Error("keepalived is not installed here");
    dir = mkdtempSync(join(tmpdir(), "molt-ka-"));
    const ip = (...a: string[]) => execFileSync("ip", a, { stdio: "pipe" });
    ip("netns", "add", ns);
    ip("netns", "add", peer);
    // Made inside the namespaces: nothing of it is ever in the host's (deleting them removes it).
    ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "mka1", "netns", peer);
    ip("-n", ns, "link", "set", "eth0", "up");
    ip("-n", ns, "link", "set", "lo", "up");
    ip("-n", ns, "addr", "add", `${ADDRESS}/24`, "dev", "eth0");
    ip("-n", peer, "link", "set", "mka1", "up");
    const vip = { address: VIP, virtualRouterId: 201 };
    writeFileSync(
      join(dir, "setup.sh"),
      renderKeepalivedSetupScript({
        vip,
        node: { name: "ka-1", address: ADDRESS, generation: 1, check: { kind: "etcd", metricsPort: 2381 } },
        runMode: "process",
        install: "image",
        deadlineSeconds: 20,
      }),
    );
    writeFileSync(join(dir, "release.sh"), renderKeepalivedReleaseScript(vip, "release", 20));
    writeFileSync(join(dir, "resume.sh"), renderKeepalivedReleaseScript(vip, "resume", 20));
  });
  after(() => {
    for (const pid of netnsPids()) spawnSync("kill", ["-9", pid], { stdio: "ignore" });
    spawnSync("ip", ["netns", "del", ns], { stdio: "ignore" });
    spawnSync("ip", ["netns", "del", peer], { stdio: "ignore" });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("releases without waiting for keepalived's exit; resume waits for it, then runs a new one", () => {
    // One shell in the namespace, its own mounts: what a machine is to these scripts. The
    // lab's endpoint check is replaced by one that passes, so this node takes the VIP.
    const script = `
set -euo pipefail
mount -t tmpfs none /etc/keepalived
mkdir -p /run/molt /var/log/molt && mount -t tmpfs none /run/molt && mount -t tmpfs none /var/log/molt
holds() { ip -o -4 addr show dev eth0 | grep -qF " ${VIP}/"; }
alive() { kill -0 "$1" 2>/dev/null && echo yes || echo no; }
bash ${dir}/setup.sh </dev/null >>${dir}/scripts.log 2>&1
printf '#!/bin/sh\\nexit 0\\n' >/etc/keepalived/molt-check-endpoint.sh
until holds; do sleep 0.05; done
old=$(cat /run/molt/keepalived.pid)
t=$(date +%s%N)
bash ${dir}/release.sh >>${dir}/scripts.log 2>&1
echo "release ms=$(( ($(date +%s%N) - t) / 1000000 )) holds=$(holds && echo yes || echo no) old=$(alive "$old")"
bash ${dir}/release.sh >>${dir}/scripts.log 2>&1
echo "release-again holds=$(holds && echo yes || echo no)"
t=$(date +%s%N)
bash ${dir}/resume.sh >>${dir}/scripts.log 2>&1
new=$(cat /run/molt/keepalived.pid)
same=$([ "$old" = "$new" ] && echo yes || echo no)
echo "resume ms=$(( ($(date +%s%N) - t) / 1000000 )) old=$(alive "$old") new=$(alive "$new") same=$same"
until holds; do sleep 0.05; done
echo "holds-again"
bash ${dir}/release.sh >>${dir}/scripts.log 2>&1
while kill -0 "$new" 2>/dev/null; do sleep 0.05; done
echo "finally holds=$(holds && echo yes || echo no)"
# A marker left from long ago whose pid now belongs to another program: resume does not wait
# for that program (its deadline here is 20 s; the sleep lasts 60).
sleep 60 &
echo $! >/run/molt/keepalived.stopping
t=$(date +%s%N)
bash ${dir}/resume.sh >>${dir}/scripts.log 2>&1
echo "stale-marker resume ms=$(( ($(date +%s%N) - t) / 1000000 )) new=$(alive "$(cat /run/molt/keepalived.pid)")"
kill %1
last=$(cat /run/molt/keepalived.pid)
bash ${dir}/release.sh >>${dir}/scripts.log 2>&1
while kill -0 "$last" 2>/dev/null; do sleep 0.05; done
`;
    const r = spawnSync(
      "timeout",
      ["90", "ip", "netns", "exec", ns, "unshare", "-m", "--propagation", "private", "bash"],
      {
        input: script,
        encoding: "utf8",
      },
    );
    const out = r.stdout.trim();
    console.log(`      ${out.split("\n").join("\n      ")}`);
    const scripts = () => spawnSync("cat", [join(dir, "scripts.log")], { encoding: "utf8" }).stdout;
    assert.equal(r.status, 0, `${out}\n${r.stderr}\nthe scripts said:\n${scripts()}`);
    const line = (k: string) => out.split("\n").find((l) => l.startsWith(k)) ?? "";
    // The VIP is gone from the node when the release returns, and keepalived is not waited for.
    assert.match(line("release "), /holds=no old=yes/);
    // A second release (a retried step) changes nothing and succeeds.
    assert.match(line("release-again"), /holds=no/);
    // Resume: the old process has exited, a new one runs.
    assert.match(line("resume "), /old=no new=yes same=no/);
    assert.ok(out.includes("holds-again"), "the resumed keepalived takes the VIP again");
    assert.match(line("finally"), /holds=no/);
    assert.match(line("stale-marker"), /new=yes/);
    assert.ok(Number(/ms=(\d+)/.exec(line("stale-marker"))?.[1]) < 20_000, "it did not wait for the unrelated pid");
    const left = netnsPids().map((p) => spawnSync("cat", [`/proc/${p}/comm`], { encoding: "utf8" }).stdout.trim());
    assert.ok(!left.includes("keepalived"), `no keepalived left in the namespace: ${left.join(", ")}`);
  });
});
