# Initialises a new etcd cluster on the first control-plane node (what `kubeadm init`
# does for stacked etcd): a CA, member certificates, and a one-member cluster.
if [ ! -f "$PKI/ca.key" ]; then
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$PKI/ca.key.tmp" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key.tmp" -subj "/CN=etcd-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt" 2>/dev/null
  mv "$PKI/ca.key.tmp" "$PKI/ca.key"
fi
issue_member_certs
if [ ! -d "$DATA/member" ]; then
  write_config "$NODE_NAME=https://$NODE_IP:2380" new
fi
start_etcd
wait_for "etcd to serve on $NODE_NAME" local_status_ok
has_leader() { local_ctl endpoint status -w fields | grep -q '"Leader" : [1-9]'; }
wait_for "a leader" has_leader
log "etcd initialised"
