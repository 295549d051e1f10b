// Runtime of the lab load balancer: one HAProxy (Debian) per lab in front of the API
// servers, on the bridge address; attachments are its backend servers, like a cloud
// target group. Changes are applied with a graceful master-worker reload, and an
// attachment is done only when the running HAProxy reports the server.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { assertRoot, ensureBridge, LabHostError, parseSubnet, sh, waitFor } from "./host";
import type { LabLbInputs, LabLbAttachmentInputs } from "./lb";
import { claimLab, readLabClaim, releaseLab, type LabClaim } from "./owner";

const DEADLINE_MS = 30_000;

function lbDir(i: { labRoot: string; lab: string }): string {
  return join(i.labRoot, "labs", i.lab, "lb");
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function masterPid(dir: string): number | undefined {
  const f = join(dir, "haproxy.pid");
  if (!existsSync(f)) return undefined;
  const pid = Number(readFileSync(f, "utf8").trim().split("\n")[0]);
  return pid > 0 && pidAlive(pid) ? pid : undefined;
}

function render(dir: string, i: LabLbInputs): string {
  const servers = existsSync(join(dir, "servers"))
    ? readdirSync(join(dir, "servers"))
        .sort()
        .map((n) => `  server ${n} ${readFileSync(join(dir, "servers", n), "utf8").trim()}`)
    : [];
  const bind = i.bind ?? parseSubnet(i.subnet).gateway;
  return [
    "global",
    "  master-worker",
    `  stats socket ${join(dir, "admin.sock")} mode 600 level admin`,
    "defaults",
    "  mode tcp",
    "  timeout connect 3s",
    "  timeout client 1h",
    "  timeout server 1h",
    "  retries 2",
    "  option redispatch",
    "frontend apiserver",
    `  bind ${bind}:${i.port}`,
    "  default_backend apiservers",
    "backend apiservers",
    "  balance roundrobin",
    // /readyz over TLS, like a cloud LB's health check of kube-apiservers.
    "  option httpchk GET /readyz",
    "  http-check expect status 200",
    "  default-server check check-ssl verify none inter 1s fall 2 rise 1",
    ...servers,
    "",
  ].join("\n");
}

function adminQuery(dir: string, command: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(join(dir, "admin.sock"));
    let out = "";
    s.on("connect", () => s.write(command + "\n"));
    s.on("data", (d) => (out += d.toString()));
    s.on("end", () => resolve(out));
    s.on("error", () => resolve(""));
  });
}

/** The running backend servers: name and address (`show servers state`: srv_name, srv_addr). */
async function serversRunningAt(dir: string): Promise<{ name: string; address: string }[]> {
  const out = await adminQuery(dir, "show servers state apiservers");
  return out
    .split("\n")
    .filter((l) => /^\d+ apiservers /.test(l))
    .map((l) => ({ name: l.split(" ")[3], address: l.split(" ")[4] }));
}

/** Serializes config changes of one LB across provider processes. */
async function withLock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  const lock = join(dir, "lock");
  await waitFor(
    `the lab LB lock ${lock}`,
    async () => {
      try {
        mkdirSync(lock);
        writeFileSync(join(lock, "pid"), String(process.pid));
        return true;
      } catch {
        const owner = Number(existsSync(join(lock, "pid")) ? readFileSync(join(lock, "pid"), "utf8") : "0");
        if (owner && !pidAlive(owner)) rmSync(lock, { recursive: true, force: true });
        return false;
      }
    },
    DEADLINE_MS,
  );
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function apply(dir: string, i: LabLbInputs): Promise<void> {
  writeFileSync(join(dir, "haproxy.cfg"), render(dir, i));
  await sh("haproxy", ["-c", "-f", join(dir, "haproxy.cfg")]);
  const pid = masterPid(dir);
  if (pid) process.kill(pid, "SIGUSR2");
  else {
    const args = ["-W", "-D", "-f", join(dir, "haproxy.cfg"), "-p", join(dir, "haproxy.pid")];
    await (i.netns ? sh("ip", ["netns", "exec", i.netns, "haproxy", ...args]) : sh("haproxy", args));
  }
}

export async function createLb(i: LabLbInputs): Promise<{ id: string; outs: LabLbInputs & { address: string } }> {
  // A lab another stack owns is refused before anything is touched (molt's preflight refuses
  // it earlier; this holds for any engine run).
  if (i.owner) claimLab(i.labRoot, i.lab, i.owner);
  assertRoot();
  const dir = lbDir(i);
  // In a machine's namespace, the machine's interfaces carry it; otherwise the host's bridge.
  if (!i.netns) await ensureBridge(i.bridge, parseSubnet(i.subnet));
  mkdirSync(join(dir, "servers"), { recursive: true });
  await withLock(dir, () => apply(dir, i));
  await waitFor(
    "the lab load balancer to answer on its admin socket",
    async () => (await adminQuery(dir, "show info")).includes("Name: HAProxy"),
    DEADLINE_MS,
  );
  return { id: `${i.lab}/lb`, outs: { ...i, address: `${i.bind ?? parseSubnet(i.subnet).gateway}:${i.port}` } };
}

/**
 * Deletes the load balancer of `i`'s stack, unless another stack still uses it: the lab
 * belongs to another stack, or servers are still attached in a lab a stack has claimed (a
 * stack's own attachments are deleted before its load balancer, so what is left is another
 * stack's). Then the HAProxy keeps running for them, and only this stack's record of it goes.
 * The owner's delete gives the lab up either way. A load balancer in a lab nobody claimed
 * (one made outside molt's stacks) goes as before.
 */
export async function removeLb(i: LabLbInputs): Promise<{ kept?: string }> {
  const claim = readLabClaim(i.labRoot, i.lab);
  const kept = keptFor(i, claim);
  if (i.owner && claim && claim.stack === i.owner.stack && claim.backend === i.owner.backend)
    releaseLab(i.labRoot, i.lab, i.owner);
  if (kept) return { kept };
  const dir = lbDir(i);
  const pid = masterPid(dir);
  if (pid) {
    process.kill(pid, "SIGTERM");
    await waitFor("the lab load balancer to stop", async () => !pidAlive(pid), DEADLINE_MS);
  }
  rmSync(dir, { recursive: true, force: true });
  return {};
}

/** Why the load balancer of `i` stays for another stack, or undefined. */
function keptFor(i: LabLbInputs, claim: LabClaim | undefined): string | undefined {
  if (!claim) return undefined;
  if (i.owner && (claim.stack !== i.owner.stack || claim.backend !== i.owner.backend))
    return `lab ${i.lab} belongs to stack ${claim.stack} (${claim.backend})`;
  const servers = join(lbDir(i), "servers");
  const attached = existsSync(servers) ? readdirSync(servers).sort() : [];
  return attached.length ? `servers of another stack are still attached: ${attached.join(", ")}` : undefined;
}

export async function attach(a: LabLbAttachmentInputs): Promise<{ id: string; outs: LabLbAttachmentInputs }> {
  assertRoot();
  const dir = lbDir(a.lb);
  if (!existsSync(join(dir, "haproxy.cfg")))
    throw new LabHostError(`lab load balancer of lab ${a.lb.lab} does not exist`);
  await withLock(dir, async () => {
    writeFileSync(join(dir, "servers", a.server), `${a.address}:${a.port}`);
    await applyAndConfirm(dir, a.lb, `HAProxy to route to ${a.server}`, (running) =>
      running.some((s) => s.name === a.server),
    );
  });
  return { id: `${a.lb.lab}/lb/${a.server}`, outs: a };
}

/**
 * What the load balancer really routes to for this attachment (`pulumi preview --refresh`):
 * the backend's address:port, or undefined when the server was taken out (by hand).
 */
export function attachedTarget(a: LabLbAttachmentInputs): string | undefined {
  const f = join(lbDir(a.lb), "servers", a.server);
  return existsSync(f) ? readFileSync(f, "utf8").trim() : undefined;
}

export async function detach(a: LabLbAttachmentInputs): Promise<void> {
  const dir = lbDir(a.lb);
  if (!existsSync(join(dir, "haproxy.cfg"))) return;
  await withLock(dir, async () => {
    // By name and by address: an owner's HAProxy (an adopted cluster's) may name its servers
    // otherwise than molt names the node.
    // By address only where no server has the node's name (an address may be reused by a newer node).
    const servers = join(dir, "servers");
    const names = existsSync(servers) ? readdirSync(servers) : [];
    for (const f of names) {
      const at = readFileSync(join(servers, f), "utf8").trim().split(/[\s]/)[0];
      const byAddress = !names.includes(a.server) && at === `${a.address}:${a.port}`;
      if (f === a.server || byAddress) rmSync(join(servers, f), { force: true });
    }
    await applyAndConfirm(dir, a.lb, `HAProxy to stop routing to ${a.server} (${a.address})`, (running) =>
      running.every((s) => s.name !== a.server && (names.includes(a.server) || s.address !== a.address)),
    );
  });
}

/**
 * Applies the configuration and waits, still holding the lock, until the running HAProxy
 * shows it: reloads never overlap (a SIGUSR2 that arrives while the master is still
 * reloading can be lost), and a reload that did not take is signalled again.
 */
async function applyAndConfirm(
  dir: string,
  i: LabLbInputs,
  what: string,
  done: (running: { name: string; address: string }[]) => boolean,
): Promise<void> {
  await apply(dir, i);
  let signalled = Date.now();
  await waitFor(
    what,
    async () => {
      if (done(await serversRunningAt(dir))) return true;
      if (Date.now() - signalled > 5_000) {
        await apply(dir, i);
        signalled = Date.now();
      }
      return false;
    },
    DEADLINE_MS,
  );
}
