# Joins this node's etcd to an existing cluster the way `kubeadm join --control-plane`
# does with learner mode: add as learner, start with initial-cluster-state=existing, wait
# until caught up with the leader, promote. Idempotent: every step checks first.
# Extra inputs: JOIN_ENDPOINTS (client URLs of healthy voters); stdin: the etcd CA
# certificate followed by its key (PEM), fetched from a healthy node.
[ -n "${JOIN_ENDPOINTS:-}" ] || die "JOIN_ENDPOINTS is empty"
log "joining through $JOIN_ENDPOINTS"
if [ ! -f "$PKI/ca.key" ]; then
  material=$(cat)
  printf '%s\n' "$material" | awk '/BEGIN CERTIFICATE/,/END CERTIFICATE/' > "$PKI/ca.crt"
  printf '%s\n' "$material" | awk '/BEGIN .*PRIVATE KEY/,/END .*PRIVATE KEY/' > "$PKI/ca.key"
  unset material
  if [ ! -s "$PKI/ca.crt" ] || [ ! -s "$PKI/ca.key" ]; then die "no CA material on stdin"; fi
fi
issue_member_certs
peer_url="https://$NODE_IP:2380"

member_line() { ctl "$JOIN_ENDPOINTS" member list | grep -F ", $peer_url, " || true; }

# Local data of a member the cluster no longer has: an earlier join of this machine was
# interrupted, and its member removed as a stray. It can never rejoin with that identity:
# stop it and start over (only on a positive answer from the cluster, never on an error).
members=$(ctl "$JOIN_ENDPOINTS" member list) || die "cannot list the members through $JOIN_ENDPOINTS"
if [ -d "$DATA/member" ] && ! printf '%s\n' "$members" | grep -qF ", $peer_url, "; then
  log "local etcd data belongs to a member the cluster no longer has; starting the join over"
  if etcd_running; then
    pid=$(cat "$PIDFILE")
    kill "$pid" 2>/dev/null || true
    wait_exit "the stale etcd to stop" "$pid"
  fi
  rm -rf "${DATA:?}"/* "$PIDFILE"
fi

if [ ! -d "$DATA/member" ]; then
  line=$(member_line)
  if [ -z "$line" ]; then
    # etcd 3.4 refuses an add until the receiving member has seen every voter for 5s:
    # retry until added or the deadline, then re-read (a retried add may have landed).
    until out=$(ctl "$JOIN_ENDPOINTS" member add "$NODE_NAME" --peer-urls="$peer_url" --learner 2>&1); do
      case "$out" in
        *"Peer URLs already exists"*) break ;;
      esac
      expired && die "member add failed until the deadline: $out"
      log "member add not accepted yet: $(printf '%s' "$out" | tail -n 1)"
      sleep 1
    done
    # etcd 3.5 answers a member list from what the asked member has applied: a follower may
    # not have the add the leader committed yet. Asked again for up to 10 s (3.6 lists
    # linearizably); still absent after that, the add went wrong.
    listed_by=$(( $(date +%s) + 10 ))
    delay=0.02
    until line=$(member_line) && [ -n "$line" ]; do
      [ "$(date +%s)" -lt "$listed_by" ] || die "member add reported success but $peer_url is not a member"
      sleep "$delay"
      delay=$(awk -v d="$delay" 'BEGIN { d = d * 2; if (d > 0.5) d = 0.5; print d }')
    done
  fi
  # initial-cluster: every started member plus this one.
  cluster=$(ctl "$JOIN_ENDPOINTS" member list | awk -F', ' -v me="$NODE_NAME" -v url="$peer_url" '
    $3 != "" && $4 != url { printf "%s%s=%s", sep, $3, $4; sep = "," }
    END { printf "%s%s=%s", sep, me, url }')
  write_config "$cluster" existing
  log "member added; initial cluster $cluster"
fi
start_etcd
wait_for "etcd to serve on $NODE_NAME" local_status_ok
log "etcd serving"

member_id=$(member_line | cut -d, -f1)
[ -n "$member_id" ] || die "this node is not a member of the cluster"
is_learner=$(member_line | awk -F', ' '{ print $6 }')
if [ "$is_learner" = "true" ]; then
  # Caught up = applied at least what the leader had applied when we started looking.
  leader_applied=$(ctl "$JOIN_ENDPOINTS" endpoint status -w fields | awk '/"RaftAppliedIndex"/ { if ($3 > m) m = $3 } END { print m + 0 }')
  caught_up() { etcd_alive_or_die; [ "$(local_ctl endpoint status -w fields | awk '/"RaftAppliedIndex"/ { print $3 }')" -ge "$leader_applied" ]; }
  wait_for "the learner to catch up to applied index $leader_applied" caught_up
  log "caught up to $leader_applied"
  until out=$(ctl "$JOIN_ENDPOINTS" member promote "$member_id" 2>&1); do
    case "$out" in
      *"not a learner"*) break ;;
    esac
    etcd_alive_or_die
    expired && die "promote failed until the deadline: $out"
    log "promote not accepted yet: $(printf '%s' "$out" | tail -n 1)"
    sleep 0.5
  done
fi
voter() { [ "$(member_line | awk -F', ' '{ print $2 "/" $6 }')" = "started/false" ]; }
wait_for "$NODE_NAME to be a started voting member" voter
log "etcd joined as a voting member ($member_id)"
