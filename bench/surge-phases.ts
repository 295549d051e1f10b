// Where a Kubernetes surge's time goes, read after the fact from the new lab machine's own
// files (on the host, no SSH): kubeadm's klog timestamps (/var/log/molt/kubeadm.log),
// lab-kubelet's log, the new etcd member's log (/var/log/molt/etcd.log), the files the join
// script leaves. Processes on the lab machines write
// local time on the host's clock, so the instants compare with molt's events and the probe's.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** Instants (ms since the epoch) of one joining node's steps; absent when its log lacks them. */
export interface JoinMarks {
  /** The machine's init written (LabMachine create, just before its "boot"). */
  machineCreated?: number;
  /** lab-kubelet's first line: the machine booted. */
  booted?: number;
  /** kubeadm join's first line (the join script has read the join material). */
  kubeadmStart?: number;
  /** kubeadm wrote the static pod manifests (control-plane prepare done). */
  manifests?: number;
  /** kubeadm wrote bootstrap-kubelet.conf and (re)started the kubelet. */
  kubeletBootstrapConf?: number;
  /** The etcd member added as a learner. */
  learnerAdded?: number;
  /** kubeadm saw its learner promoted. */
  promoted?: number;
  /** lab-kubelet got its client certificate (TLS bootstrap; kubeadm join waits for it). */
  kubeletCert?: number;
  /** lab-kubelet registered the Node. */
  nodeRegistered?: number;
  /** kubeadm join returned (the join script's marker file). */
  kubeadmEnd?: number;
  /** The new etcd member's own steps (its zap log, UTC). */
  etcd?: EtcdMarks;
}

/**
 * A new etcd member's way to serving clients: it serves only once its "publish" of itself
 * (a ClusterMemberAttrSet proposal) has come back applied, after up to the request timeout
 * (5 s + 2 x election timeout) per try (docs/benchmarks.md, "The new etcd member's 7 s").
 */
export interface EtcdMarks {
  started?: number;
  /** raft learned the leader (its first message from it). */
  leaderKnown?: number;
  /** The leader's snapshot received and saved, and applied (with its raft index). */
  snapshotReceived?: number;
  snapshotIndex?: number;
  snapshotApplied?: number;
  /** The first failed publish and its error; how many failed before the one that worked. */
  publishFailed?: number;
  publishError?: string;
  publishFailures?: number;
  published?: number;
}

const KLOG = /^[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+)\s+\d+ [^\]]+\] (.*)$/;
const GOLOG = /^(\d{4})\/(\d\d)\/(\d\d) (\d\d:\d\d:\d\d\.\d+) (.*)$/;

/** Local time as the machine's processes wrote it (no zone in either log format). */
function localMs(year: number, month: string, day: string, time: string): number {
  const [hms, frac = "0"] = time.split(".");
  const [h, m, s] = hms.split(":").map(Number);
  return new Date(year, Number(month) - 1, Number(day), h, m, s, Number(frac.slice(0, 3).padEnd(3, "0"))).getTime();
}

/** The first klog line of kubeadm.log whose message matches, as an instant (klog has no year: `year`). */
export function klogMarks(
  text: string,
  year: number,
): Pick<JoinMarks, "kubeadmStart" | "manifests" | "kubeletBootstrapConf" | "learnerAdded" | "promoted"> {
  const out: ReturnType<typeof klogMarks> = {};
  for (const line of text.split("\n")) {
    const m = KLOG.exec(line);
    if (!m) continue;
    const at = localMs(year, m[1], m[2], m[3]);
    const msg = m[4];
    out.kubeadmStart ??= at;
    if (/wrote static Pod manifest for component "kube-scheduler"/.test(msg)) out.manifests ??= at;
    if (/writing bootstrap kubelet config file/.test(msg)) out.kubeletBootstrapConf ??= at;
    if (/Adding etcd member .* as learner/.test(msg)) out.learnerAdded ??= at;
    if (/The learner was promoted as a voting member/.test(msg)) out.promoted ??= at;
  }
  return out;
}

/** lab-kubelet's log: its first line, its client certificate, its Node registered. */
export function kubeletMarks(text: string): Pick<JoinMarks, "booted" | "kubeletCert" | "nodeRegistered"> {
  const out: ReturnType<typeof kubeletMarks> = {};
  for (const line of text.split("\n")) {
    const m = GOLOG.exec(line);
    if (!m) continue;
    const at = localMs(Number(m[1]), m[2], m[3], m[4]);
    out.booted ??= at;
    if (/TLS bootstrap: certificate .* issued/.test(m[5])) out.kubeletCert ??= at;
    if (/registered Node/.test(m[5])) out.nodeRegistered ??= at;
  }
  return out;
}

/** The new member's etcd log (JSON lines, `ts` in UTC with its zone). */
export function etcdMarks(text: string): EtcdMarks {
  const out: EtcdMarks = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith("{")) continue;
    let e: { ts?: string; msg?: string; error?: string; "incoming-snapshot-index"?: number };
    try {
      e = JSON.parse(line) as typeof e;
    } catch {
      continue;
    }
    const at = e.ts ? Date.parse(e.ts) : NaN;
    if (!Number.isFinite(at) || !e.msg) continue;
    const msg = e.msg;
    if (msg === "starting an etcd server") out.started ??= at;
    else if (/ elected leader /.test(msg)) out.leaderKnown ??= at;
    else if (msg === "received and saved database snapshot") {
      out.snapshotReceived ??= at;
      out.snapshotIndex ??= e["incoming-snapshot-index"];
    } else if (msg === "applied snapshot") out.snapshotApplied ??= at;
    else if (msg === "failed to publish local member to cluster through raft" && out.published === undefined) {
      out.publishFailed ??= at;
      out.publishError ??= e.error;
      out.publishFailures = (out.publishFailures ?? 0) + 1;
    } else if (msg === "published local member to cluster through raft") out.published ??= at;
  }
  return out;
}

/** The marks of a lab machine that still exists (`machineDir`: infra/lab/machine-impl.ts machineDir). */
export function readJoinMarks(machineDir: string, year = new Date().getFullYear()): JoinMarks {
  const file = (p: string) => join(machineDir, p);
  const read = (p: string) => (existsSync(file(p)) ? readFileSync(file(p), "utf8") : "");
  const mtime = (p: string) => (existsSync(file(p)) ? statSync(file(p)).mtimeMs : undefined);
  return {
    machineCreated: mtime("init.sh"),
    ...kubeletMarks(read("root/var/log/molt/kubelet.log")),
    ...klogMarks(read("root/var/log/molt/kubeadm.log"), year),
    kubeadmEnd: mtime("root/etc/kubernetes/.molt-join-done"),
    etcd: etcdMarks(read("root/var/log/molt/etcd.log")),
  };
}

/** One surge in phases (ms), each from the end of the one before, in the order a join runs. */
export interface SurgePhases {
  node: string;
  /** molt's surge decision -> machine created: engine start, program, host key. */
  engineToMachine?: number;
  /** -> booted (sshd, lab-kubelet). */
  boot?: number;
  /** -> kubeadm join starts: LB attach, join material read on a healthy node, host files. */
  attachAndMaterial?: number;
  /** -> static pod manifests written: discovery, certificates, kubeconfigs. */
  kubeadmPrepare?: number;
  /** -> learner added (etcd health check, bootstrap kubelet config). */
  toLearner?: number;
  /** -> learner promoted: etcd started, caught up, promoted. */
  catchUpAndPromote?: number;
  /** -> the kubelet's client certificate: its TLS bootstrap, which kubeadm join waits for. */
  kubeletBootstrap?: number;
  /** -> kubeadm join returned: mark-control-plane, control-plane check. */
  kubeadmRest?: number;
  /** -> molt's surge `up` returned: the join script's API check, the engine finishing. */
  upEnd?: number;
  /** molt's surge `up` wall. */
  upMs?: number;
  /** The probe's API server ready, and Node Ready, relative to the `up`'s end (negative: before). */
  apiReadyVsUpEnd?: number;
  nodeReadyVsUpEnd?: number;
  /** The probe's API server ready relative to the kubelet's certificate (negative: before it). */
  apiReadyVsKubeletCert?: number;
  /** The new etcd member, from the learner added (ms): started, leader known, snapshot in, published. */
  etcd?: {
    started?: number;
    leaderKnown?: number;
    snapshotReceived?: number;
    snapshotApplied?: number;
    snapshotIndex?: number;
    publishFailed?: number;
    publishError?: string;
    publishFailures?: number;
    published?: number;
  };
}

/** The phases of one surge from its marks, molt's decision and `up` end, and the probe's instants. */
export function surgePhases(
  node: string,
  m: JoinMarks,
  decidedAt: number | undefined,
  upEndAt: number | undefined,
  probe: { apiReady?: number; nodeReady?: number },
): SurgePhases {
  const d = (a?: number, b?: number) => (a !== undefined && b !== undefined ? Math.round(b - a) : undefined);
  return {
    node,
    engineToMachine: d(decidedAt, m.machineCreated),
    boot: d(m.machineCreated, m.booted),
    attachAndMaterial: d(m.booted, m.kubeadmStart),
    kubeadmPrepare: d(m.kubeadmStart, m.manifests),
    toLearner: d(m.manifests, m.learnerAdded),
    catchUpAndPromote: d(m.learnerAdded, m.promoted),
    kubeletBootstrap: d(m.promoted, m.kubeletCert),
    kubeadmRest: d(m.kubeletCert, m.kubeadmEnd),
    upEnd: d(m.kubeadmEnd, upEndAt),
    upMs: d(decidedAt, upEndAt),
    apiReadyVsUpEnd: d(upEndAt, probe.apiReady),
    nodeReadyVsUpEnd: d(upEndAt, probe.nodeReady),
    apiReadyVsKubeletCert: d(m.kubeletCert, probe.apiReady),
    ...(m.etcd && m.etcd.started !== undefined
      ? {
          etcd: {
            started: d(m.learnerAdded, m.etcd.started),
            leaderKnown: d(m.learnerAdded, m.etcd.leaderKnown),
            snapshotReceived: d(m.learnerAdded, m.etcd.snapshotReceived),
            snapshotApplied: d(m.learnerAdded, m.etcd.snapshotApplied),
            snapshotIndex: m.etcd.snapshotIndex,
            publishFailed: d(m.learnerAdded, m.etcd.publishFailed),
            publishError: m.etcd.publishError,
            publishFailures: m.etcd.publishFailures ?? 0,
            published: d(m.learnerAdded, m.etcd.published),
          },
        }
      : {}),
  };
}
