// Human output of the CLI: events as lines (waits updated in place on a terminal), plan and
// status tables, adoption's checks.
import { loadStackConfig } from "../config";
import type { RolloutEvent } from "../events";
import type { WaitKey } from "../core/model";
import { type Inspection } from "../inspect";
import { hexMemberId } from "../etcd-id";
import { type PlannedReplacement } from "../rollout";
import { repoRoot } from "../stack/engine";
import { waitDeadlineSeconds } from "../core/plan";
import { type AdoptEvent } from "../adopt";
import { renderPromotionEvent } from "./promotion";

export const ts = () => new Date().toISOString().slice(11, 19);

/** "3h 12m", "45m", "50s": how long until something, for people. */
/** How a leaked machine's line begins, by what became of it. */
const LEAK_VERB: Record<Extract<RolloutEvent, { type: "leaked-machines" }>["machines"][number]["action"], string> = {
  terminate: "found",
  kept: "found",
  terminated: "terminated",
  "terminate-failed": "could NOT terminate",
};

export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : `${m}m`;
}

/**
 * Human output. Waits are one line each: what is awaited and its deadline, said once when
 * the wait starts; on a terminal that line is updated in place while it lasts, elsewhere
 * (CI logs) a "still waiting" line follows every 30 s; when the wait ends, how long it took.
 */
export function humanRenderer(o: {
  write: (s: string) => void;
  tty: boolean;
  /** The deadline of a wait with this key, in seconds (from the stack's molt:timeouts). */
  deadlineOf?: (key: WaitKey) => number | undefined;
  /** A live progress line (cli/progress.ts) shows engine steps: they are not printed as lines. */
  live?: boolean;
  now?: () => number;
}): (e: RolloutEvent) => void {
  const now = o.now ?? Date.now;
  const stamp = () => new Date(now()).toISOString().slice(11, 19);
  const out = (s: string): void => o.write(`${stamp()}  ${s}\n`);
  const seconds = (ms: number) => `${Math.round(ms / 1000)}s`;
  let wait:
    { key: string; reason: string; since: number; deadline?: number; said: number; inPlace: boolean } | undefined;
  /** The last pass seen while waiting: shown once the wait ends. */
  let lastObserved: RolloutEvent | undefined;
  const waitLine = (w: NonNullable<typeof wait>, t: number) =>
    `  … waiting ${seconds(t - w.since)}${w.deadline !== undefined ? ` of at most ${w.deadline}s` : ""}: ${w.reason}`;
  const endWait = () => {
    if (!wait) return;
    const line = `  ✓ waited ${((now() - wait.since) / 1000).toFixed(1)}s: ${wait.reason}`;
    if (wait.inPlace) o.write(`\r\x1b[2K${stamp()}  ${line}\n`);
    else out(line);
    wait = undefined;
  };
  const flushObserved = () => {
    if (lastObserved) render(lastObserved);
    lastObserved = undefined;
  };
  return (e) => {
    if (e.type === "decision" && e.operation.kind === "wait") {
      const op = e.operation;
      const t = now();
      if (wait?.key === op.key) {
        wait.reason = op.reason;
        if (o.tty) o.write(`\r\x1b[2K${stamp()}  ${waitLine(wait, t)}`);
        else if (t - wait.said >= 30_000) {
          wait.said = t;
          out(waitLine(wait, t).replace("waiting", "still waiting"));
        }
        return;
      }
      endWait();
      flushObserved();
      const deadline = o.deadlineOf?.(op.key);
      wait = { key: op.key, reason: op.reason, since: t, said: t, inPlace: o.tty, ...(deadline ? { deadline } : {}) };
      if (o.tty) o.write(`${stamp()}  ${waitLine(wait, t)}`);
      else out(`waiting${deadline ? ` (at most ${deadline}s)` : ""} for: ${op.reason}`);
      return;
    }
    // The wait's own poll intervals are not news; every other event ends a wait.
    if (e.type === "phase" && e.phase === "wait" && e.ok) return;
    // A hook's result has a line of its own (its `hook` event), with its time and how it failed.
    if (e.type === "phase" && e.phase === "hook") return;
    if (e.type === "observed" && wait) return void (lastObserved = e);
    endWait();
    flushObserved();
    render(e);
  };
  function render(e: RolloutEvent): void {
    switch (e.type) {
      case "start":
        out(
          `rollout of stack ${e.stack}: ${e.replicas} × ` +
            `${e.image}${e.kubernetesVersion ? ` / Kubernetes ${e.kubernetesVersion}` : ""} on ${e.provider}`,
        );
        if (e.window)
          out(
            `maintenance window ${e.window.window}: open, closes ${e.window.closesAt.replace("T", " ")} ` +
              `(in ${duration(e.window.closesInSeconds)}); a replacement under way then is finished, then the run ` +
              "pauses (exit 5)",
          );
        return;
      case "lock":
        return out(
          `holding stack lock ${e.where} (run ${e.runId}, expires ${e.ttlSeconds}s after the last renewal, ` +
            (e.scope === "backend"
              ? "seen by every runner of this backend)"
              : e.scope === "cluster"
                ? "in the cluster's etcd: seen by every runner that reaches the cluster)"
                : e.scope === "cluster-pending"
                  ? "THIS MACHINE ONLY until the stack's first node is up: its etcd then holds the lock; " +
                    "the first node's engine run is refused if another run changed the stack)"
                  : "THIS MACHINE ONLY: molt cannot keep a shared lock in this backend; " +
                    "run one rollout per stack at a time)"),
        );
      case "lock-recovered":
        return out(
          e.reason === "expired"
            ? `took over the expired lock of run ${e.previousRunId ?? "?"} (pid ${e.previousPid} on ` +
                `${e.previousHost}, ` +
                `started ${e.previousStartedAt}; ` +
                (e.silentSeconds !== undefined
                  ? `not renewed for ${e.silentSeconds}s)`
                  : "its etcd lease expired: not kept alive for its time to live)")
            : "took over the lock of a run that died on this machine " +
                `(pid ${e.previousPid}, started ${e.previousStartedAt})`,
        );
      case "lock-renew-failed":
        return out(`  ! renewing the stack lock failed (retried): ${e.message}`);
      case "lock-lost":
        return out(`! ${e.message}: stopping at the next boundary`);
      case "lock-release-failed":
        return out(`! giving the stack lock up failed: ${e.message}`);
      case "engine-lock-cleared":
        return out(
          "removed the engine lock a dead run left (pulumi cancel): " +
            e.locks.map((l) => `pid ${l.pid} on ${l.host} since ${l.since}`).join(", "),
        );
      case "pending-cleared":
        for (const p of e.operations)
          out(
            `cleared an operation a killed engine left pending: ${p.operation} ${p.urn.split("::").pop()}: ${p.reason}`,
          );
        return;
      case "leaked-machines":
        for (const m of e.machines)
          out(
            `! ${LEAK_VERB[m.action]} a machine a killed run left on ${e.where}: ` +
              `${m.id}${m.node ? ` (node ${m.node})` : ""}${m.address ? ` ${m.address}` : ""} ${m.state}` +
              `${m.reason ? `: ${m.reason}` : ""}`,
          );
        return;
      case "engine-leftovers":
        for (const p of e.processes)
          out(`${p.how} a ${p.kind} process an earlier run left: pid ${p.pid} ${p.command.slice(0, 100)}`);
        return;
      case "observed":
        return out(`pass ${e.pass}: ${e.nodes.map(nodeTag).join(" ") || "(no nodes)"}`);
      case "decision":
        return out(`→ ${e.operation.kind}: ${e.operation.reason}`);
      case "phase":
        return out(
          `  ${e.ok ? "✓" : "✗"} ${e.phase} (${e.operation}${e.node ? ` ${e.node}` : ""}) ` +
            `${(e.ms / 1000).toFixed(1)}s${e.detail ? `: ${e.detail}` : ""}`,
        );
      case "snapshot":
        return out(
          `etcd snapshot saved before the first membership change: ${e.path} (${e.bytes} bytes, from ${e.node})`,
        );
      case "backups-pruned":
        return out(
          `removed ${e.removed.length} older etcd snapshot(s) of stack ${e.stack} ` +
            `(molt:backups.keep ${e.keep}): ${e.removed.join(", ")}`,
        );
      case "engine":
        return out(`  | ${e.line}`);
      case "warning":
        return out(`  ! warning${e.node ? ` (${e.node})` : ""}: ${e.message}`);
      case "hook-output":
        return out(`  | ${e.hook} ${e.node}: ${e.line}`);
      case "hook":
        // A command's lines were shown as they came; a callback's rejection only says so here.
        if (e.source === "callback")
          for (const l of e.output ? e.output.split("\n") : []) out(`  | ${e.hook} ${e.node}: ${l}`);
        return out(
          `  ${e.ok ? "✓" : "✗"} ${e.hook} hook (${e.source}) for ${e.node} ${(e.ms / 1000).toFixed(1)}s` +
            (e.error ? `: ${e.error}` : ""),
        );
      case "resource":
        // On a terminal the live line shows every step (cli/progress.ts); a log gets starts and failures.
        if (o.live || e.status === "done") return;
        return out(`  · ${e.op} ${e.resource}${e.status === "failed" ? " FAILED" : ""}`);
      case "left-for-owner":
        return out(
          `adopted machine ${e.node} (${e.address}) retired: ${e.done.join(", ")}; it is left running for its owner`,
        );
      case "adopted-destroyed":
        return out(`adopted machine ${e.node} (${e.address}, imported as ${e.machine}) retired: ${e.done.join(", ")}`);
      case "release-check":
      case "verification":
      case "soak":
        return renderPromotionEvent(e, out);
      case "summary": {
        out(`${e.result.toUpperCase()}: ${e.reason}`);
        for (const m of e.leftForOwner ?? [])
          out(
            `yours to delete: adopted machine ${m.node} (${m.address}, ` +
              `${m.ssh}${m.providerId ? `, ${m.providerId}` : ""}): ${m.done.join(", ")}; molt no longer uses it`,
          );
        const p = e.phases;
        const f = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
        return out(
          `wall ${f(e.wallMs)}, ${e.operations} operation(s): provision ${f(p.provision)}, etcd ${f(p.etcd)}, ` +
            `waiting ${f(p.wait)}, observing ${f(p.observe)}, snapshot ${f(p.snapshot)}, ` +
            `${p.hook ? `hooks ${f(p.hook)}, ` : ""}molt ${f(p.molt)}` +
            (e.replaced.length ? `; replaced ${e.replaced.join(", ")}` : ""),
        );
      }
    }
  }
}

/** One event as a line of --json output. */
export function printJson(e: RolloutEvent): void {
  process.stdout.write(JSON.stringify(e, (_k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n");
}

/** The stack's molt:notify (defaults if the file does not load: the run then refuses before any event). */
export function notifySettings(stack: string): { includeHookOutput: boolean } {
  try {
    return loadStackConfig(process.env.MOLT_PROJECT_DIR ?? repoRoot, stack).notify;
  } catch {
    return { includeHookOutput: false };
  }
}

/** The deadline of each wait, from the stack's molt:timeouts (undefined if the file does not load). */
export function waitDeadlines(stack: string): (key: WaitKey) => number | undefined {
  try {
    const timeouts = loadStackConfig(process.env.MOLT_PROJECT_DIR ?? repoRoot, stack).intent.timeouts;
    return (key) => waitDeadlineSeconds(key, timeouts);
  } catch {
    return () => undefined;
  }
}

export function printPlanTable(rows: PlannedReplacement[]): void {
  if (rows.length === 0) return void process.stdout.write("no node is outdated\n");
  const header = ["#", "node", "from", "to", "why"];
  const data = rows.map((r) => [String(r.order), r.node, r.from, r.to, r.reason]);
  for (const line of table([header, ...data])) process.stdout.write(line + "\n");
}

/** Rows as columns as wide as their widest cell, two spaces apart, however long a name is. */
export function table(rows: string[][]): string[] {
  if (rows.length === 0) return [];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join("  ")
      .trimEnd(),
  );
}

export function printInspection(i: Inspection, what: "plan" | "status"): void {
  const w = (s: string) => process.stdout.write(s + "\n");
  w(
    `stack ${i.stack}${i.exists ? "" : " (not created yet)"}: want ${i.intent.replicas} × ` +
      `${i.intent.image}${i.intent.kubernetesVersion ? ` / k8s ${i.intent.kubernetesVersion}` : ""} on ` +
      `${i.intent.provider}, maxSurge ${i.intent.maxSurge}`,
  );
  if (i.chain) for (const line of chainLines(i.chain)) w(line);
  if (what === "status") {
    w("");
    const kube = i.nodes.some((n) => n.kube) || i.intent.kubernetesVersion !== undefined;
    const header = ["NODE", "IMAGE", "MEMBER", "ROLE", "HEALTHY", ...(kube ? ["API", "NODE"] : []), "UP-TO-DATE"];
    const rows = i.nodes.map((n) => [
      n.name,
      n.image,
      n.member ? hexMemberId(n.member.id) : "-",
      n.member ? (n.member.learner ? "learner" : n.member.leader ? "leader" : "voter") : "-",
      n.member?.healthy && n.kube?.healthy !== false ? "yes" : "no",
      ...(kube
        ? n.kube
          ? [
              n.kube.apiserverVersion ?? "down",
              (n.kube.nodeReady ? "Ready" : "NotReady") + (n.kube.cordoned ? ",cordoned" : ""),
            ]
          : ["?", "?"]
        : []),
      n.outdated ? "no" : "yes",
    ]);
    for (const line of table([header, ...rows])) w(line);
    const stray = i.members.filter((m) => !i.nodes.some((n) => n.member?.id === m.id));
    for (const m of stray)
      w(
        `stray member ${hexMemberId(m.id)} ${m.name || "(unstarted)"}${m.learner ? " learner" : ""} ` +
          m.peerURLs.join(","),
      );
    w("");
    for (const c of i.conditions) w(`${c.type.padEnd(22)} ${c.status.padEnd(8)} ${c.reason}`);
    w("");
    if (i.release) {
      w(`release ${i.release.description}`);
      w(`  verification: ${i.release.verification.state}: ${i.release.verification.detail}`);
      if (i.release.requireVerifiedOn.length)
        w(`  rolls only releases verified on: ${i.release.requireVerifiedOn.join(", ")}`);
      w("");
    }
    w(progressLine(i));
    for (const [node, c] of Object.entries(i.certificates ?? {}))
      w(
        `certificates of ${node}: ` +
          (c.ok ? `first to expire ${c.path} at ${c.notAfter}${c.expiring ? " (EXPIRING: replaced)" : ""}` : c.error),
      );
  } else {
    printPlanTable(i.replacements);
  }
  w(`next operation: ${i.next.kind}: ${i.next.reason}`);
}

/** A chained upgrade (molt:images): its steps, each a full add-first roll, and where the cluster is. */
export function chainLines(c: NonNullable<Inspection["chain"]>): string[] {
  const now = c.steps[c.current];
  const on = now.nodes.length;
  const where =
    now.state === "rolling"
      ? `step ${c.current + 1} of ${c.steps.length} (${now.kubernetesVersion}) rolling: ${on} node(s) on it`
      : `step ${c.current + 1} of ${c.steps.length} (${now.kubernetesVersion}) next, once ` +
        `${c.steps[c.current - 1]?.kubernetesVersion ?? "the cluster's version"} has converged`;
  return [
    `chain ${c.steps.map((s) => s.kubernetesVersion).join(" -> ")} (molt:images): one minor per step, each a full ` +
      `add-first roll; ${where}`,
    ...table([
      ["  STEP", "KUBERNETES", "IMAGE", "ETCD", "NODES ON IT", "REPLACES", "STATE"],
      ...c.steps.map((s, n) => [
        `  ${n + 1}`,
        s.kubernetesVersion,
        s.image,
        s.etcdVersion ?? "-",
        String(s.nodes.length),
        String(s.replacements),
        s.state,
      ]),
    ]),
  ];
}

/** How far a roll is, for `status` (a run stopped by --max-replacements or a window continues from here). */
export function progressLine(i: Inspection): string {
  const p = i.progress;
  if (p.outdated.length === 0) return `rollout: ${p.upToDate}/${p.replicas} nodes up to date, nothing to replace`;
  return (
    `rollout: ${p.upToDate}/${p.replicas} nodes up to date; ${p.outdated.length} to replace ` +
    `(${p.outdated.join(", ")})`
  );
}

export function humanAdopt(e: AdoptEvent | { type: "summary"; stack: string; nodes: number }): void {
  const out = (s: string): void => void process.stdout.write(`${ts()}  ${s}\n`);
  switch (e.type) {
    case "host-key":
      return out(`host key of ${e.host}:${e.port}: ${e.fingerprint} (${e.trust})`);
    case "check":
      return out(`✓ ${e.check}: ${e.detail}`);
    case "warning":
      return out(`! ${e.message}`);
    case "recorded":
      out(`recorded in stack ${e.stack} (nothing on the cluster was changed but its ownership marker):`);
      for (const line of table(
        e.nodes.map((n) => [
          n.name,
          n.address,
          `etcd ${n.etcdVersion}${n.kubernetesVersion ? `, Kubernetes ${n.kubernetesVersion}` : ""}` +
            (n.leader ? ", leader" : ""),
          `ssh ${n.ssh}`,
          `(adopted, generation ${n.generation})`,
        ]),
      ))
        out(`  ${line}`);
      return;
    case "summary":
      return out(
        `ADOPTED: ${e.nodes} node(s) of stack ${e.stack}; \`molt plan --stack ${e.stack}\` shows their replacement`,
      );
  }
}

/** One node in an `observed` line: name[image,etcd role,Kubernetes state,outdated]. */
function nodeTag(n: Extract<RolloutEvent, { type: "observed" }>["nodes"][number]): string {
  const member = n.member
    ? (n.member.learner ? ",learner" : n.member.leader ? ",leader" : "") + (n.member.healthy ? "" : ",unhealthy")
    : ",no member";
  const kube = n.kube ? (n.kube.cordoned ? ",cordoned" : "") + (n.kube.healthy ? "" : ",k8s-unhealthy") : "";
  return `${n.name}[${n.image}${member}${kube}${n.outdated ? ",outdated" : ""}]`;
}
