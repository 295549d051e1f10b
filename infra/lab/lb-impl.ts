// Runtime of the lab load balancer: one HAProxy (Debian) per lab in front of the API
// servers, on the bridge address; attachments are its backend servers, like a cloud
// target group. Changes are applied with a graceful master-worker reload, and an
// attachment is done only when the running HAProxy reports the server.
import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { assertRoot, ensureBridge, LabHostError, parseSubnet, sh, waitFor } from "./host";
import { labLbSourceAddress, type LabLbInputs, type LabLbAttachmentInputs } from "./lb";
import { claimLab, readLabClaim, releaseLab, type LabClaim } from "./owner";
import type { TargetObservation } from "../../orchestrator/core/observations";

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

/**
 * The master's pid from its pid file; undefined without one. On every reload the master
 * removes its pid file, creates it empty, then writes its pid (2.6.12: missing, then empty,
 * for up to 5 ms), so a read in that gap finds no file, or an empty one: for the pollers of a
 * reload that is "not yet". Where no master must mean none (to start one, or to stop it),
 * ask runningMaster.
 */
export function masterPid(dir: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(join(dir, "haproxy.pid"), "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  const pid = Number(text.trim().split("\n")[0]);
  return pid > 0 && pidAlive(pid) ? pid : undefined;
}

/**
 * The running master, also in the middle of a reload: with no pid read, an HAProxy that answers
 * on the admin socket is running, and its pid file is awaited (otherwise a second HAProxy would
 * be started beside it, or the running one left running).
 */
export async function runningMaster(dir: string): Promise<number | undefined> {
  const pid = masterPid(dir);
  if (pid) return pid;
  if (!(await adminQuery(dir, "show info")).includes("Name: HAProxy")) return undefined;
  let found: number | undefined;
  await waitFor(
    `the lab load balancer's pid file (${join(dir, "haproxy.pid")}) after a reload`,
    async () => (found = masterPid(dir)) !== undefined,
    DEADLINE_MS,
  );
  return found;
}

/** The server lines: a deregistered server gets weight 0 (no new connections), a new one starts disabled. */
function serverLines(dir: string, i: LabLbInputs): string[] {
  if (!existsSync(join(dir, "servers"))) return [];
  return readdirSync(join(dir, "servers"))
    .sort()
    .map((n) => {
      const options = [
        ...(existsSync(join(dir, "deregistered", n)) ? ["weight 0"] : []),
        ...(i.healthCheck && existsSync(join(dir, "pending", n)) ? ["disabled"] : []),
      ];
      const target = readFileSync(join(dir, "servers", n), "utf8").trim();
      return [`  server ${n} ${target}`, ...options].join(" ");
    });
}

export function render(dir: string, i: LabLbInputs): string {
  const bind = i.bind ?? parseSubnet(i.subnet).gateway;
  const hc = i.healthCheck;
  const source = labLbSourceAddress(i);
  // Without a cloud's slow checks, a server that is down (a new node until its API server
  // serves; HAProxy starts a checked server down) or changing state is checked every 200 ms,
  // a healthy one every second: a new node is seen healthy within 200 ms of serving, not 1 s.
  const every = hc
    ? `inter ${hc.intervalSeconds}s fall ${hc.unhealthyThreshold} rise ${hc.healthyThreshold}`
    : "inter 1s fastinter 200ms downinter 200ms fall 2 rise 1";
  return [
    "global",
    "  master-worker",
    `  stats socket ${join(dir, "admin.sock")} mode 600 level admin`,
    // Like a cloud's, a slow LB keeps what its checks learnt across reloads (lb-impl saves it first).
    ...(hc ? [`  server-state-file ${join(dir, "state")}`] : []),
    "defaults",
    "  mode tcp",
    "  timeout connect 3s",
    "  timeout client 1h",
    "  timeout server 1h",
    // A cloud LB does not retry a refused connection on another target: the client sees it.
    ...(hc ? ["  retries 0", "  load-server-state-from-file global"] : ["  retries 2", "  option redispatch"]),
    "frontend apiserver",
    `  bind ${bind}:${i.port}`,
    "  default_backend apiservers",
    "backend apiservers",
    "  balance roundrobin",
    ...(source ? [`  source ${source}`] : []),
    // /readyz over TLS, like a cloud LB's health check of kube-apiservers; etcd's client port: a TCP check.
    ...(i.serves === "etcd"
      ? [`  default-server check ${every}`]
      : [
          "  option httpchk GET /readyz",
          "  http-check expect status 200",
          `  default-server check check-ssl verify none ${every}`,
        ]),
    ...serverLines(dir, i),
    "",
  ].join("\n");
}

/**
 * One command on HAProxy's admin socket: its answer, or "" when it fails or gives none within
 * 5 s (a worker stuck in a reload must not hold an observe pass that asks it).
 */
function adminQuery(dir: string, command: string, deadlineMs = 5_000): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(join(dir, "admin.sock"));
    let out = "";
    let failed = false;
    s.setTimeout(deadlineMs, () => ((failed = true), s.destroy()));
    s.on("connect", () => s.write(command + "\n"));
    s.on("data", (d) => (out += d.toString()));
    s.on("error", () => (failed = true));
    s.on("close", () => resolve(failed ? "" : out));
  });
}

/** A running backend server as `show servers state` describes it. */
interface RunningServer {
  name: string;
  address: string;
  /** srv_op_state: 0 stopped (down), 1 starting, 2 running (up), 3 stopping. */
  opState: number;
  /**
   * srv_admin_state: in maintenance while 0x01 (forced), 0x02 (inherited) or 0x20 (resolution) is
   * set; 0x04 only records that the configuration said `disabled` (it stays after `state ready`).
   */
  adminState: number;
  /** srv_uweight: 0 takes no new connections. */
  weight: number;
}

/** The running backend servers (`show servers state`: name, address, op and admin state, weight). */
async function serversRunningAt(dir: string): Promise<RunningServer[]> {
  const out = await adminQuery(dir, "show servers state apiservers");
  return out
    .split("\n")
    .filter((l) => /^\d+ apiservers /.test(l))
    .map((l) => {
      const f = l.split(" ");
      return { name: f[3], address: f[4], opState: Number(f[5]), adminState: Number(f[6]), weight: Number(f[7]) };
    });
}

/** srv_admin_state bits that keep a server in maintenance: forced, inherited, resolution (not 0x04). */
const MAINTENANCE = 0x23;

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

/**
 * The load balancer's own address on the host's bridge (labLbSourceAddress), added once; not
 * where HAProxy runs elsewhere (a machine's namespace, an address of its own to bind).
 */
async function ensureSourceAddress(i: LabLbInputs): Promise<void> {
  const source = labLbSourceAddress(i);
  if (!source || i.netns || i.bind) return;
  const addrs = await sh("ip", ["-o", "-4", "addr", "show", "dev", i.bridge]);
  if (!addrs.includes(`inet ${source}/32 `)) await sh("ip", ["addr", "add", `${source}/32`, "dev", i.bridge]);
}

async function apply(dir: string, i: LabLbInputs): Promise<void> {
  await ensureSourceAddress(i);
  writeFileSync(join(dir, "haproxy.cfg"), render(dir, i));
  const pid = await runningMaster(dir);
  // What the checks learnt so far, for the reloaded process (server-state-file).
  if (i.healthCheck && pid) {
    const state = await adminQuery(dir, "show servers state");
    if (/^1\n/.test(state)) writeFileSync(join(dir, "state"), state);
  }
  await sh("haproxy", ["-c", "-f", join(dir, "haproxy.cfg")]);
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
  const pid = await runningMaster(dir);
  if (pid) {
    process.kill(pid, "SIGTERM");
    await waitFor("the lab load balancer to stop", async () => !pidAlive(pid), DEADLINE_MS);
  }
  const source = labLbSourceAddress(i);
  if (source && !i.netns && !i.bind)
    await sh("ip", ["addr", "del", `${source}/32`, "dev", i.bridge], { allowFail: true });
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
    const known = existsSync(join(dir, "servers", a.server));
    writeFileSync(join(dir, "servers", a.server), `${a.address}:${a.port}`);
    // A cloud LB sends a new target nothing until it passes its checks: it starts disabled,
    // then is enabled as down (below), so `healthyThreshold` checks must pass first.
    if (a.lb.healthCheck && !known) {
      mkdirSync(join(dir, "pending"), { recursive: true });
      writeFileSync(join(dir, "pending", a.server), "");
    }
    await applyAndConfirm(dir, a.lb, `HAProxy to route to ${a.server}`, (running) =>
      running.some((s) => s.name === a.server),
    );
    await enablePending(dir);
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
      if (f === a.server || byAddress)
        for (const d of ["servers", "deregistered", "pending"]) rmSync(join(dir, d, f), { force: true });
    }
    await applyAndConfirm(dir, a.lb, `HAProxy to stop routing to ${a.server} (${a.address})`, (running) =>
      running.every((s) => s.name !== a.server && (names.includes(a.server) || s.address !== a.address)),
    );
  });
}

/**
 * Applies the configuration and waits, still holding the lock, until the running HAProxy
 * shows it: reloads never overlap (a SIGUSR2 that arrives while the master is still
 * starting is lost: seen with Debian's 2.6), and a reload that did not take is signalled
 * again, but only if the master forked no worker since the last signal (a slow reload that
 * is still coming is not doubled: a second reload would read the configuration of the
 * moment and drop what the CLI changed on the first one).
 * Then it waits until only the new worker accepts on the admin socket: a reload hands the
 * listening socket over, and until the old worker lets go, a CLI command can reach either
 * (seen: "No such server." for the server just added, and the change lost with the old worker).
 */
async function applyAndConfirm(
  dir: string,
  i: LabLbInputs,
  what: string,
  done: (running: RunningServer[]) => boolean,
): Promise<void> {
  let workers = workersOf(masterPid(dir));
  await apply(dir, i);
  let signalled = Date.now();
  await waitFor(
    what,
    async () => {
      if (done(await serversRunningAt(dir))) return true;
      const now = workersOf(masterPid(dir));
      if (Date.now() - signalled > 5_000 && now.every((w) => workers.includes(w))) {
        workers = now;
        await apply(dir, i);
        signalled = Date.now();
      }
      return false;
    },
    DEADLINE_MS,
  );
  await waitFor(
    `the old HAProxy worker to let go of the admin socket (${what})`,
    async () => adminSocketHolders(dir).length === 1,
    DEADLINE_MS,
  );
}

/** The worker processes of an HAProxy master (its children), oldest first; none without a master. */
function workersOf(master: number | undefined): number[] {
  if (!master) return [];
  const out: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      // The fields after the command's closing parenthesis: state, ppid, ...
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === master) out.push(Number(e));
    } catch {
      /* gone meanwhile */
    }
  }
  return out.sort((a, b) => a - b);
}

/**
 * The workers that hold a listening socket of the admin socket's path (bound under a
 * temporary name and renamed, so matched by prefix), read in the master's network namespace.
 */
export function adminSocketHolders(dir: string): number[] {
  const master = masterPid(dir);
  if (!master) return [];
  const path = join(dir, "admin.sock");
  let unix: string;
  try {
    unix = readFileSync(`/proc/${master}/net/unix`, "utf8");
  } catch {
    return [];
  }
  // Num RefCount Protocol Flags Type St Inode Path; flags 00010000: listening.
  const listening = new Set(
    unix
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f[3] === "00010000" && f[7] !== undefined && f[7].startsWith(path))
      .map((f) => `socket:[${f[6]}]`),
  );
  return workersOf(master).filter((pid) => {
    try {
      return readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try {
          return listening.has(readlinkSync(`/proc/${pid}/fd/${fd}`));
        } catch {
          return false;
        }
      });
    } catch {
      return false;
    }
  });
}

/**
 * New servers of a cloud-like LB (pending, disabled in the configuration) are enabled as down:
 * the checks bring them up. One CLI line, so no request is routed between the two commands.
 * Done when the running HAProxy shows each out of maintenance; only then is it no longer pending.
 */
async function enablePending(dir: string): Promise<void> {
  const pending = existsSync(join(dir, "pending")) ? readdirSync(join(dir, "pending")) : [];
  if (pending.length === 0) return;
  const running = await serversRunningAt(dir);
  for (const n of pending.filter((p) => running.some((s) => s.name === p))) {
    await waitFor(
      `HAProxy to take ${n} out of maintenance`,
      async () => {
        const r = (await serversRunningAt(dir)).find((s) => s.name === n);
        if (r && (r.adminState & MAINTENANCE) === 0) return true;
        await adminQuery(dir, `set server apiservers/${n} state ready; set server apiservers/${n} health down`);
        return false;
      },
      DEADLINE_MS,
    );
    rmSync(join(dir, "pending", n), { force: true });
  }
}

/** A node's server in the load balancer: by its name, else by its address (an owner's HAProxy names its own). */
function serverOf(dir: string, node: { name: string; address: string }): string | undefined {
  const servers = join(dir, "servers");
  const names = existsSync(servers) ? readdirSync(servers) : [];
  if (names.includes(node.name)) return node.name;
  return names.find((n) => readFileSync(join(servers, n), "utf8").trim().split(":")[0] === node.address);
}

/** Seconds a deregistered server drains before it counts as unused (the lab's deregistration delay). */
function deregistrationDelay(i: LabLbInputs): number {
  return i.healthCheck?.deregistrationDelaySeconds ?? 0;
}

/** How long a deregistration takes to drain at most: the delay, then the checks that would notice a stop. */
export function labDrainSeconds(i: LabLbInputs): number {
  const hc = i.healthCheck;
  return hc ? hc.deregistrationDelaySeconds + hc.intervalSeconds * hc.unhealthyThreshold : 2;
}

/** Each node's target as the running HAProxy and the deregistration records say (AWS's words). */
export async function labTargets(
  i: LabLbInputs,
  nodes: readonly { name: string; address: string }[],
  now = Date.now(),
): Promise<Record<string, TargetObservation>> {
  const dir = lbDir(i);
  if (!existsSync(join(dir, "haproxy.cfg"))) throw new LabHostError(`lab load balancer of lab ${i.lab} does not exist`);
  const running = await serversRunningAt(dir);
  if (running.length === 0 && !existsSync(join(dir, "admin.sock")))
    throw new LabHostError(`lab load balancer of lab ${i.lab} does not answer on its admin socket`);
  const out: Record<string, TargetObservation> = {};
  for (const node of nodes) {
    const name = serverOf(dir, node);
    const r = name ? running.find((s) => s.name === name) : undefined;
    const marker = name ? join(dir, "deregistered", name) : undefined;
    if (!name) out[node.name] = { state: "unused", detail: "not attached" };
    else if (marker && existsSync(marker)) {
      const left = Number(readFileSync(marker, "utf8")) + deregistrationDelay(i) * 1000 - now;
      out[node.name] =
        r && r.weight !== 0
          ? { state: "draining", detail: "deregistration not yet loaded" }
          : left > 0
            ? { state: "draining", detail: `${Math.ceil(left / 1000)}s of the deregistration delay left` }
            : { state: "unused", detail: "deregistered and drained" };
    } else if (!r) out[node.name] = { state: "initial", detail: "not yet loaded" };
    else if (r.adminState & MAINTENANCE) out[node.name] = { state: "initial", detail: "not yet enabled" };
    else if (r.weight === 0) out[node.name] = { state: "draining", detail: "weight 0 without a deregistration record" };
    else if (r.opState === 2) out[node.name] = { state: "healthy" };
    else out[node.name] = { state: "unhealthy", detail: "failing its health check" };
  }
  return out;
}

/**
 * Deregisters a node's server (weight 0: no new connections, open ones stay; the time is
 * recorded for the deregistration delay), or registers it again. Done when the running
 * HAProxy shows it.
 */
export async function setDeregistered(
  i: LabLbInputs,
  node: { name: string; address: string },
  deregistered: boolean,
): Promise<void> {
  assertRoot();
  const dir = lbDir(i);
  if (!existsSync(join(dir, "haproxy.cfg"))) throw new LabHostError(`lab load balancer of lab ${i.lab} does not exist`);
  await withLock(dir, async () => {
    const name = serverOf(dir, node);
    // Nothing to take out; but a node to put back that has no server lost its attachment.
    if (!name && deregistered) return;
    if (!name)
      throw new LabHostError(
        `${node.name} (${node.address}) has no server in the lab load balancer of lab ${i.lab}: its attachment ` +
          "was removed outside molt; `molt rollout` cannot put it back (refresh the stack, or replace the node)",
      );
    const marker = join(dir, "deregistered", name);
    if (deregistered === existsSync(marker)) return;
    if (deregistered) {
      mkdirSync(join(dir, "deregistered"), { recursive: true });
      writeFileSync(marker, String(Date.now()));
    } else rmSync(marker, { force: true });
    await applyAndConfirm(
      dir,
      i,
      deregistered ? `HAProxy to send no new connections to ${name}` : `HAProxy to route to ${name} again`,
      (running) => running.some((s) => s.name === name && (s.weight === 0) === deregistered),
    );
  });
}
