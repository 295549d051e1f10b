// The API endpoint as a virtual IP (VIP) that follows add-first replacement without an
// outside load balancer: keepalived on every control-plane node, VRRP on the control-plane
// network, a track script on the node's own API server (/readyz) or, on the lab's
// etcd-only images, its etcd (/health). KubeOne's vSphere example does the same with a
// fixed MASTER and priorities per VM index; molt's nodes come and go, so every node is
// configured alike and by its own facts only:
// - every instance starts as BACKUP with `nopreempt`: a node that joins never takes the
//   VIP from a healthy holder;
// - the track script starts failed (`init_fail`) and has no weight: a node is in FAULT, so
//   never a candidate, until its own endpoint answered `rise` checks in a row, and drops
//   out (FAULT, VIP released) as soon as it fails `fall` checks;
// - the priority grows with the node's generation: when the holder goes, the newest
//   eligible node takes the VIP (the one that will be retired last);
// - the retiring node releases the VIP before anything is taken from it: molt stops its
//   keepalived (which sends a priority-0 advert, so a backup takes over at once) and waits
//   until another node holds the VIP (orchestrator/edges/vip.ts);
// - multicast VRRP (no peer list): a node's configuration never changes when others come
//   and go. No VRRP authentication: VRRPv2's password travels in clear text and VRRPv3 has
//   none; a virtual_router_id unique on the segment keeps clusters apart.
import { isIPv4 } from "../../orchestrator/core/addresses";
import { renderScript } from "../kubeadm/script";

export interface VipSettings {
  /** The virtual IPv4 address clients use (host of the control-plane endpoint). */
  address: string;
  /** VRRP virtual router id, 1-255: unique among VRRP routers on the network segment. */
  virtualRouterId: number;
  /** Seconds between VRRP adverts (default 1): a dead holder is replaced after about 3x this. */
  advertIntervalSeconds?: number;
  /**
   * The lowest priority of a new node: above every adopted node's (core/keepalived-conf.ts
   * joinPriorityFloor) while the group has any; absent: 100.
   */
  priorityFloor?: number;
}

/** What keeps a node eligible for the VIP: its local API server, or (etcd-only lab) its local etcd. */
export type VipCheck = { kind: "apiserver"; port: number } | { kind: "etcd"; metricsPort: number };

export interface VipNode {
  name: string;
  /** The node's own address: keepalived runs VRRP on the interface that holds it. */
  address: string;
  generation: number;
  check: VipCheck;
}

/** How keepalived runs on the node: the distribution's systemd unit, or a plain process (the lab). */
export type KeepalivedRunMode = "systemd" | "process";

export const KEEPALIVED_DIR = "/etc/keepalived";
export const KEEPALIVED_CONF = `${KEEPALIVED_DIR}/keepalived.conf`;
export const CHECK_SCRIPT = `${KEEPALIVED_DIR}/molt-check-endpoint.sh`;
/** keepalived's notify script: records the instance's VRRP state for molt to read. */
export const NOTIFY_SCRIPT = `${KEEPALIVED_DIR}/molt-notify.sh`;
/** Where the notify script records the state (MASTER, BACKUP, FAULT, STOP). */
export const STATE_FILE = "/run/molt/vrrp-state";
/** Written by the set-up: how keepalived runs here, for the release and resume scripts. */
export const RUN_MODE_FILE = `${KEEPALIVED_DIR}/molt-run-mode`;
export const INTERFACE_PLACEHOLDER = "@MOLT_VRRP_INTERFACE@";
/** Where the set-up puts the group's authentication block (from stdin), or nothing. */
export const AUTH_PLACEHOLDER = "@MOLT_VRRP_AUTHENTICATION@";
/** Check cadence: a failing endpoint loses the VIP after FALL s, a recovered one is eligible after RISE s. */
export const CHECK = { intervalSeconds: 1, timeoutSeconds: 2, fall: 2, rise: 2 } as const;

const NODE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function validateVip(v: VipSettings): void {
  if (!isIPv4(v.address)) throw new Error(`VIP address ${JSON.stringify(v.address)} is not an IPv4 address`);
  if (!Number.isInteger(v.virtualRouterId) || v.virtualRouterId < 1 || v.virtualRouterId > 255)
    throw new Error(`virtualRouterId ${v.virtualRouterId} is not a VRRP router id (1-255)`);
  const a = v.advertIntervalSeconds ?? 1;
  if (!Number.isInteger(a) || a < 1 || a > 255)
    throw new Error(`advertIntervalSeconds ${a} is not a whole number of seconds (1-255)`);
  const f = v.priorityFloor ?? 100;
  if (!Number.isInteger(f) || f < 1 || f > 254) throw new Error(`priorityFloor ${f} is not a VRRP priority (1-254)`);
}

/**
 * VRRP priority: newer nodes rank higher (floor-240, 10 apart, wrapping; 100-240 and every
 * 15 generations for molt's own groups). After a release, backups take over after a skew of
 * (256 - priority)/256 advert intervals: 10 apart is about 40 ms, so the newest node wins
 * even on a loaded host (1 apart, 4 ms, it often did not).
 */
export function vrrpPriority(generation: number, floor = 100): number {
  const span = Math.max(1, Math.floor((240 - floor) / 10) + 1);
  return Math.min(floor + 10 * (generation % span), 254);
}

export function renderKeepalivedConfig(v: VipSettings, node: VipNode): string {
  validateVip(v);
  if (!NODE_NAME.test(node.name)) throw new Error(`node name ${JSON.stringify(node.name)} is not a DNS-1123 label`);
  if (!isIPv4(node.address)) throw new Error(`node address ${JSON.stringify(node.address)} is not an IPv4 address`);
  if (node.address === v.address) throw new Error(`node ${node.name} has the VIP ${v.address} as its own address`);
  return [
    `# molt: keepalived of ${node.name} for the API endpoint ${v.address} (rendered by molt; do not edit)`,
    "global_defs {",
    `  router_id ${node.name}`,
    "  script_user root",
    "  enable_script_security",
    // Hosts and switches that missed the takeover's gratuitous ARP learn it within a minute.
    "  vrrp_garp_master_refresh 60",
    // Two backups whose takeover timers fire together (a loaded host: their skews are ~40 ms
    // apart) are both MASTER for a moment, and the hosts keep the MAC of whichever sent
    // gratuitous ARPs last. The one that yields sends one more advert before it does, so the
    // one that stays answers it with gratuitous ARPs again (garp_lower_prio_repeat, default
    // the takeover's own 5): otherwise clients send to a node without the VIP until the
    // winner's second burst 5 s later.
    "  vrrp_higher_prio_send_advert",
    "}",
    "vrrp_script molt_endpoint {",
    `  script "${CHECK_SCRIPT}"`,
    `  interval ${CHECK.intervalSeconds}`,
    `  timeout ${CHECK.timeoutSeconds}`,
    `  fall ${CHECK.fall}`,
    `  rise ${CHECK.rise}`,
    // Not eligible before the first successful checks: a new node never takes the VIP early.
    "  init_fail",
    "}",
    "vrrp_instance molt_api_endpoint {",
    "  state BACKUP",
    "  nopreempt",
    `  interface ${INTERFACE_PLACEHOLDER}`,
    `  virtual_router_id ${v.virtualRouterId}`,
    `  priority ${vrrpPriority(node.generation, v.priorityFloor)}`,
    `  advert_int ${v.advertIntervalSeconds ?? 1}`,
    // An adopted group's authentication (the set-up puts it here from stdin), or none.
    AUTH_PLACEHOLDER,
    "  virtual_ipaddress {",
    `    ${v.address}/32 dev ${INTERFACE_PLACEHOLDER}`,
    "  }",
    // No weight: a failing endpoint puts the instance in FAULT (the VIP is released).
    "  track_script {",
    "    molt_endpoint",
    "  }",
    // Every state change is recorded, so molt sees which nodes could take the VIP over.
    `  notify "${NOTIFY_SCRIPT}"`,
    "}",
    "",
  ].join("\n");
}

/** keepalived calls it with (type, name, state, priority): the state goes to STATE_FILE. */
export function renderNotifyScript(): string {
  return [
    "#!/usr/bin/env bash",
    "# molt: keepalived notify script: records this node's VRRP state (MASTER, BACKUP, FAULT, STOP).",
    "# Rendered by molt; do not edit. molt reads the file to see which nodes could take the VIP over.",
    "set -euo pipefail",
    `readonly STATE_FILE='${STATE_FILE}'`,
    'mkdir -p "$(dirname "$STATE_FILE")"',
    `printf '%s\\n' "\${3:-UNKNOWN}" >"$STATE_FILE.tmp"`,
    'mv "$STATE_FILE.tmp" "$STATE_FILE"',
    "",
  ].join("\n");
}

/** The track script: exit 0 while the node's own endpoint is healthy. */
export function renderCheckScript(check: VipCheck): string {
  const body =
    check.kind === "apiserver"
      ? [
          // The local API server, verified against the cluster CA under the name every kubeadm
          // serving certificate carries ("kubernetes"; 127.0.0.1 is not among its SANs).
          `readonly PORT=${check.port}`,
          "readonly CA=/etc/kubernetes/pki/ca.crt",
          // No CA yet: kubeadm has not run, so there is no API server to be ready.
          '[ -r "$CA" ] || exit 1',
          `exec curl -fsS --max-time ${CHECK.timeoutSeconds} --cacert "$CA" --resolve "kubernetes:$PORT:127.0.0.1" \\`,
          '  -o /dev/null "https://kubernetes:$PORT/readyz"',
        ]
      : [
          // etcd's own health endpoint on its metrics listener (kubeadm's liveness probe port):
          // a linearizable read, so false on a learner, a member without quorum or a removed one.
          `readonly URL='http://127.0.0.1:${check.metricsPort}/health'`,
          `body=$(curl -fsS --max-time ${CHECK.timeoutSeconds} "$URL")`,
          'case "$body" in',
          `  *'"health":"true"'*) exit 0 ;;`,
          "  *) exit 1 ;;",
          "esac",
        ];
  return [
    "#!/usr/bin/env bash",
    `# molt: keepalived track script: is the local ${
      check.kind === "apiserver" ? "kube-apiserver ready" : "etcd member healthy"
    }?`,
    "# Rendered by molt; do not edit. Exit 0: this node may hold the API endpoint's VIP.",
    "set -euo pipefail",
    ...body,
    "",
  ].join("\n");
}

const KEEPALIVED_FUNCTIONS = `die() {
  log "error: $*"
  exit 1
}
install_or_verify_keepalived() {
  if command -v keepalived >/dev/null 2>&1; then return 0; fi
  if [ "$INSTALL" != packages ]; then
    die "keepalived is not installed on $NODE_NAME: bake it into the image (or use install.source: packages)"
  fi
  log "installing keepalived"
  if command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends keepalived >/dev/null
  elif command -v dnf >/dev/null 2>&1; then
    dnf install -y -q keepalived >/dev/null
  else
    die "neither apt-get nor dnf found to install keepalived"
  fi
}
interface_of() {
  ip -o -4 addr show | awk -v a="$1" '{ split($4, p, "/"); if (p[1] == a) { print $2; exit } }'
}
holds_vip() {
  ip -o -4 addr show | awk -v a="$VIP_ADDRESS" '{ split($4, p, "/"); if (p[1] == a) f = 1 } END { exit !f }'
}
# Running and not told to stop: a keepalived that got SIGTERM lingers about 2 s after it
# gave the VIP away (measured: the address gone 7 ms after the signal, the process 2.26 s).
process_running() {
  local pid
  [ -f /run/molt/keepalived.pid ] || return 1
  pid=$(cat /run/molt/keepalived.pid)
  [ "$pid" != "$(cat /run/molt/keepalived.stopping 2>/dev/null)" ] && kill -0 "$pid" 2>/dev/null
}
start_keepalived() {
  local stopping
  case "$(cat "$RUN_MODE_FILE")" in
    systemd)
      systemctl enable keepalived >/dev/null 2>&1
      # A unit still stopping is started once it has stopped (systemd queues the job).
      systemctl restart keepalived
      ;;
    process)
      stopping=$(cat /run/molt/keepalived.stopping 2>/dev/null || true)
      if [ -n "$stopping" ]; then
        # Only while that pid is still keepalived: a marker left from long ago may name a pid reused since.
        wait_until "the keepalived told to stop (pid $stopping) to exit" \\
          "[ \\"\\$(cat /proc/$stopping/comm 2>/dev/null)\\" != keepalived ]"
        rm -f /run/molt/keepalived.stopping
      fi
      if process_running; then
        kill -HUP "$(cat /run/molt/keepalived.pid)"
      else
        mkdir -p /run/molt /var/log/molt
        # Detached from the SSH session: the machine keeps it, like a system service.
        setsid keepalived --dont-fork --vrrp --log-console --log-detail \\
          --use-file "$KEEPALIVED_CONF" --pid /run/molt/keepalived.pid --vrrp_pid /run/molt/keepalived-vrrp.pid \\
          >>/var/log/molt/keepalived.log 2>&1 </dev/null &
        wait_until "keepalived to run" \\
          "[ -f /run/molt/keepalived.pid ] && kill -0 \\"\\$(cat /run/molt/keepalived.pid)\\""
      fi
      ;;
    *) die "unknown keepalived run mode in $RUN_MODE_FILE" ;;
  esac
}
# Tells keepalived to stop and returns: on SIGTERM it sends its priority-0 advert and
# removes the VIP at once, then takes about 2 s more to exit. Callers wait for what they
# need (the VIP gone from this node); a start waits for the exit.
stop_keepalived() {
  local pid
  case "$(cat "$RUN_MODE_FILE" 2>/dev/null || echo none)" in
    systemd)
      systemctl disable keepalived >/dev/null 2>&1 || true
      systemctl stop --no-block keepalived >/dev/null 2>&1 || true
      ;;
    process)
      if process_running; then
        pid=$(cat /run/molt/keepalived.pid)
        echo "$pid" >/run/molt/keepalived.stopping
        kill "$pid" 2>/dev/null || true
      fi
      ;;
  esac
}
wait_until() {
  local what=$1 condition=$2 delay=0.1 deadline
  deadline=$(($(date +%s) + DEADLINE_SECONDS))
  until bash -c "$condition" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || die "timed out after \${DEADLINE_SECONDS}s waiting for $what"
    sleep "$delay"
    delay=$(awk -v d="$delay" 'BEGIN { d = d * 2; if (d > 1) d = 1; print d }')
  done
}
`;

const AUTH_FUNCTIONS = `# Reads "TYPE PASSWORD" from stdin; prints keepalived's authentication block (or nothing).
authentication_block() {
  local type="" pass="" rest="" safe='^[A-Za-z0-9._+/=@%^*(),:;~<>?&|-]+$'
  read -r type pass rest || true
  [ -n "$type" ] || return 0
  case "$type" in PASS | AH) ;; *) die "unknown VRRP auth_type on stdin (PASS or AH)" ;; esac
  if [ -n "$rest" ] || ! [[ "$pass" =~ $safe ]]; then
    die "the VRRP group's auth_pass has characters molt cannot write into keepalived.conf (not shown)"
  fi
  printf '  authentication {\\n    auth_type %s\\n    auth_pass %s\\n  }' "$type" "$pass"
}
`;

export interface KeepalivedScriptArgs {
  vip: VipSettings;
  node: VipNode;
  runMode: KeepalivedRunMode;
  /** packages: install keepalived when missing (apt/dnf); image: it must be there. */
  install: "packages" | "image";
  /** Bound on every wait inside the script. */
  deadlineSeconds?: number;
}

/**
 * Set-up (RemoteCommand create, before kubeadm): keepalived, its configuration with this
 * node's interface, the track script, started. Safe to run again. Its stdin: the group's
 * authentication ("PASS <password>" or "AH <password>", from a member) or nothing.
 */
export function renderKeepalivedSetupScript(a: KeepalivedScriptArgs): string {
  return renderScript({
    title: `keepalived of ${a.node.name} for the API endpoint VIP ${a.vip.address}`,
    constants: {
      NODE_NAME: a.node.name,
      NODE_ADDRESS: a.node.address,
      VIP_ADDRESS: a.vip.address,
      INSTALL: a.install,
      RUN_MODE: a.runMode,
      RUN_MODE_FILE,
      KEEPALIVED_CONF,
      CHECK_SCRIPT,
      CONFIG_TEXT: renderKeepalivedConfig(a.vip, a.node),
      CHECK_TEXT: renderCheckScript(a.node.check),
      NOTIFY_SCRIPT,
      NOTIFY_TEXT: renderNotifyScript(),
      INTERFACE_PLACEHOLDER,
      AUTH_PLACEHOLDER,
      DEADLINE_SECONDS: String(a.deadlineSeconds ?? 60),
    },
    functions: [KEEPALIVED_FUNCTIONS, AUTH_FUNCTIONS],
    main: `
# The group's authentication, when it has one (never logged, never on a command line).
auth=$(authentication_block)
install_or_verify_keepalived
iface=$(interface_of "$NODE_ADDRESS")
[ -n "$iface" ] || die "no interface of $NODE_NAME holds its address $NODE_ADDRESS"
install -d -m 0755 "$(dirname "$KEEPALIVED_CONF")"
printf '%s\\n' "$RUN_MODE" >"$RUN_MODE_FILE"
printf '%s' "$CHECK_TEXT" >"$CHECK_SCRIPT.tmp"
chmod 0700 "$CHECK_SCRIPT.tmp"
mv "$CHECK_SCRIPT.tmp" "$CHECK_SCRIPT"
printf '%s' "$NOTIFY_TEXT" >"$NOTIFY_SCRIPT.tmp"
chmod 0700 "$NOTIFY_SCRIPT.tmp"
mv "$NOTIFY_SCRIPT.tmp" "$NOTIFY_SCRIPT"
conf=\${CONFIG_TEXT//"$INTERFACE_PLACEHOLDER"/"$iface"}
umask 077
printf '%s' "\${conf//"$AUTH_PLACEHOLDER"/"$auth"}" >"$KEEPALIVED_CONF.tmp"
chmod 0600 "$KEEPALIVED_CONF.tmp"
keepalived --config-test --use-file "$KEEPALIVED_CONF.tmp" >&2 || die "keepalived refuses the configuration"
mv "$KEEPALIVED_CONF.tmp" "$KEEPALIVED_CONF"
start_keepalived
log "keepalived runs on $iface for $VIP_ADDRESS (VRRP; eligible once the local endpoint is healthy)"
`,
  });
}

/** keepalived's own default pid file: where an owner's keepalived run without systemd is found. */
export const OWNER_PIDFILE = "/run/keepalived.pid";
/** How the owner's keepalived ran before molt stopped it (for a resume). */
export const OWNER_RECORD = "/run/molt/owner-keepalived";

// An adopted node's keepalived is its owner's: the distribution's systemd unit (KubeOne's
// vSphere example), or a daemon found by keepalived's default pid file. A release stops it
// (a priority-0 advert: the group's best backup takes over at once) and disables the unit,
// so the VIP never comes back to a machine molt retires; a resume starts it as it ran.
const OWNER_FUNCTIONS = `owner_pid() {
  local pid
  [ -f "$OWNER_PIDFILE" ] || return 1
  pid=$(cat "$OWNER_PIDFILE")
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = keepalived ] || return 1
  echo "$pid"
}
owner_keepalived() {
  local pid
  mkdir -p "$(dirname "$OWNER_RECORD")"
  if [ "$1" = resume ]; then
    case "$(head -n1 "$OWNER_RECORD" 2>/dev/null)" in
      systemd)
        systemctl enable keepalived >/dev/null 2>&1
        systemctl start keepalived
        ;;
      process)
        if ! owner_pid >/dev/null; then
          mapfile -t argv < <(tail -n +2 "$OWNER_RECORD")
          # As it ran (it may not fork itself: --dont-fork), detached from this session.
          setsid "\${argv[@]}" >/dev/null 2>&1 </dev/null &
          wait_until "the owner's keepalived to run" \\
            "[ \\"\\$(cat /proc/\\$(cat '$OWNER_PIDFILE' 2>/dev/null)/comm 2>/dev/null)\\" = keepalived ]"
        fi
        ;;
      *) die "molt did not stop keepalived here: nothing to resume" ;;
    esac
    log "the owner's keepalived started again"
    return 0
  fi
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet keepalived 2>/dev/null; then
    echo systemd >"$OWNER_RECORD"
    systemctl disable keepalived >/dev/null 2>&1 || true
    systemctl stop --no-block keepalived
  elif pid=$(owner_pid); then
    { echo process; tr '\\0' '\\n' <"/proc/$pid/cmdline"; } >"$OWNER_RECORD"
    kill "$pid"
  elif holds_vip; then
    die "this node holds $VIP_ADDRESS, but no keepalived unit is active and $OWNER_PIDFILE names" \\
      "no keepalived: stop what holds it by hand"
  else
    log "no keepalived runs here: nothing to release"
    return 0
  fi
  wait_until "$VIP_ADDRESS to leave this node" "! ip -o -4 addr show | grep -qF ' $VIP_ADDRESS/'"
  log "the owner's keepalived stopped (and disabled); this node no longer holds $VIP_ADDRESS"
}
`;

/**
 * Release (before a node's retirement, and its teardown): keepalived stops and is disabled,
 * so the VIP moves to another node now; waits until this node no longer holds it.
 * `resume` undoes a release whose VIP found no other holder.
 */
export function renderKeepalivedReleaseScript(
  vip: Pick<VipSettings, "address">,
  action: "release" | "resume",
  deadlineSeconds = 60,
): string {
  if (!isIPv4(vip.address)) throw new Error(`VIP address ${JSON.stringify(vip.address)} is not an IPv4 address`);
  return renderScript({
    title: `${action} of the API endpoint VIP ${vip.address} on this node`,
    constants: {
      NODE_NAME: "this node",
      VIP_ADDRESS: vip.address,
      ACTION: action,
      RUN_MODE_FILE,
      KEEPALIVED_CONF,
      OWNER_PIDFILE,
      OWNER_RECORD,
      DEADLINE_SECONDS: String(deadlineSeconds),
    },
    functions: [KEEPALIVED_FUNCTIONS, OWNER_FUNCTIONS],
    main: `
if [ ! -f "$RUN_MODE_FILE" ]; then
  # Not molt's keepalived: an adopted node's, set up by its owner (KubeOne).
  owner_keepalived "$ACTION"
  return 0
fi
if [ "$ACTION" = resume ]; then
  start_keepalived
  log "keepalived started again"
  return 0
fi
stop_keepalived
wait_until "$VIP_ADDRESS to leave this node" "! ip -o -4 addr show | grep -qF ' $VIP_ADDRESS/'"
log "keepalived stopped; this node no longer holds $VIP_ADDRESS"
`,
  });
}
