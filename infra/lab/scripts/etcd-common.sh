# Shared by the lab's etcd bootstrap scripts (prepended to each; not run on its own).
# Paths follow kubeadm: /etc/kubernetes/pki/etcd for certificates, /var/lib/etcd for data.
# Inputs (environment): NODE_NAME, NODE_IP, DEADLINE_SECONDS.
PKI=/etc/kubernetes/pki/etcd
DATA=/var/lib/etcd
CONF=/etc/kubernetes/etcd.yaml
LOG=/var/log/molt/etcd.log
PIDFILE=/run/molt/etcd.pid
ETCD=/usr/local/bin/etcd
ETCDCTL=/usr/local/bin/etcdctl
export ETCDCTL_API=3
deadline=$(( $(date +%s) + ${DEADLINE_SECONDS:-300} ))

log() { printf '%s [%s] %s\n' "$(date +%T.%3N)" "$NODE_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }
expired() { [ "$(date +%s)" -ge "$deadline" ]; }

# etcdctl as the healthcheck client, against the given comma-separated endpoints.
ctl() {
  local endpoints=$1
  shift
  "$ETCDCTL" --endpoints="$endpoints" --cacert="$PKI/ca.crt" \
    --cert="$PKI/healthcheck-client.crt" --key="$PKI/healthcheck-client.key" \
    --dial-timeout=3s --command-timeout=10s "$@"
}
local_ctl() { ctl "https://127.0.0.1:2379" "$@"; }

# Waits for a condition (a command) with the script's deadline; polls from 20 ms doubling to
# 0.5 s, as molt's own waits do (lib/poll.ts): a step ends at most one interval after its condition.
wait_for() {
  local what=$1 delay=0.02
  shift
  until "$@" >/dev/null 2>&1; do
    expired && die "timed out waiting for $what"
    sleep "$delay"
    delay=$(awk -v d="$delay" 'BEGIN { d = d * 2; if (d > 0.5) d = 0.5; print d }')
  done
}

# Waits for a process this shell did not start to exit (etcd on SIGTERM), with the deadline:
# the shell's own kill -0 every 20 ms, no process started per check.
wait_exit() {
  local what=$1 pid=$2
  while kill -0 "$pid" 2>/dev/null; do
    expired && die "timed out waiting for $what"
    sleep 0.02
  done
}

# issue_cert NAME CN ORG SAN_LIST USAGE(server|client|peer)
issue_cert() {
  local name=$1 cn=$2 org=$3 sans=$4 usage=$5 ext
  [ -f "$PKI/$name.crt" ] && [ -f "$PKI/$name.key" ] && return 0
  case "$usage" in
    server) ext="extendedKeyUsage=serverAuth,clientAuth" ;;
    peer) ext="extendedKeyUsage=serverAuth,clientAuth" ;;
    client) ext="extendedKeyUsage=clientAuth" ;;
    *) die "unknown usage $usage" ;;
  esac
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/$name.key.tmp" 2>/dev/null
  openssl req -new -key "$PKI/$name.key.tmp" -subj "/O=$org/CN=$cn" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "$ext"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } > "$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt.tmp" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
  mv "$PKI/$name.key.tmp" "$PKI/$name.key"
  mv "$PKI/$name.crt.tmp" "$PKI/$name.crt"
}

# VIP mode (CLIENT_VIP set): the VIP keepalived moves between the machines is the etcd
# client endpoint of this etcd-only cluster (its stand-in for the API endpoint). Every
# member's certificate names it, every member listens on it, and its client port answers
# the host through it (only through it: the rule below refuses etcd's ports to the host).
# With Kubernetes the VIP fronts the API servers (kube-apiserver listens on every address).
CLIENT_VIP=${CLIENT_VIP:-}
if [ -x /usr/local/bin/kubeadm ]; then CLIENT_VIP=""; fi
CLIENT_LISTEN="https://127.0.0.1:2379,https://$NODE_IP:2379"
if [ -n "$CLIENT_VIP" ]; then
  CLIENT_LISTEN="https://0.0.0.0:2379"
  if [ -z "$(ip rule show pref 5)" ]; then
    ip rule add pref 5 to "$CLIENT_VIP/32" ipproto tcp dport 2379 lookup local
  fi
fi

issue_member_certs() {
  local sans="DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1,IP:0:0:0:0:0:0:0:1${CLIENT_VIP:+,IP:$CLIENT_VIP}"
  issue_cert server "$NODE_NAME" "" "$sans" server
  issue_cert peer "$NODE_NAME" "" "$sans" peer
  issue_cert healthcheck-client kube-etcd-healthcheck-client "system:masters" "" client
}

# write_config INITIAL_CLUSTER STATE
write_config() {
  cat > "$CONF.tmp" <<CFG
name: '$NODE_NAME'
data-dir: $DATA
listen-client-urls: $CLIENT_LISTEN
advertise-client-urls: https://$NODE_IP:2379
listen-peer-urls: https://$NODE_IP:2380
initial-advertise-peer-urls: https://$NODE_IP:2380
listen-metrics-urls: http://127.0.0.1:2381
initial-cluster: '$1'
initial-cluster-state: '$2'
snapshot-count: 10000
client-transport-security:
  cert-file: $PKI/server.crt
  key-file: $PKI/server.key
  client-cert-auth: true
  trusted-ca-file: $PKI/ca.crt
peer-transport-security:
  cert-file: $PKI/peer.crt
  key-file: $PKI/peer.key
  client-cert-auth: true
  trusted-ca-file: $PKI/ca.crt
CFG
  mv "$CONF.tmp" "$CONF"
}

etcd_running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start_etcd() {
  if etcd_running; then return 0; fi
  # Detached from the SSH session: the machine keeps it, like a static pod.
  setsid "$ETCD" --config-file "$CONF" >>"$LOG" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
}

# Fails fast when etcd exits instead of waiting for the deadline.
etcd_alive_or_die() {
  etcd_running || die "etcd exited; last lines of $LOG: $(tail -n 5 "$LOG" 2>/dev/null | tr '\n' ' ')"
}

local_status_ok() { etcd_alive_or_die && local_ctl endpoint status; }

mkdir -p "$PKI" "$DATA" /run/molt /var/log/molt
chmod 700 "$DATA"
umask 077
