// A node's first host key travels in its user data (AWS userData, Azure customData,
// vSphere guestinfo), which more principals can read than the node: anyone allowed
// ec2:DescribeInstanceAttribute, any process on the VM through the metadata service, vCenter
// users who may read a VM's advanced settings. So the first key only opens the first
// connection: over it, pinned, molt installs the node's next host key and from then on
// pins that one. The new key never leaves molt except over that connection.
//
// The next key is derived, not random: HMAC-SHA256 keyed with the stack's SSH client key
// (a Pulumi secret that never reaches user data) over the first host key. So a create that
// is retried after the key was installed derives the same key and accepts either one,
// and no new resource or state is needed. Whoever holds the client key already has root
// on every node, so the derivation gives nobody anything they do not have.
import { createHmac } from "node:crypto";
import { renderScript } from "../kubeadm/script";
import { HostKeyMismatchError, publicKeyBlob, SshSession, shellQuote, sshKeyPairFromSeed, type SshTarget } from "./ssh";
import { pollUntil } from "../../lib/poll";

/** The host key that follows `firstHostKey` on a node reached with `clientPrivateKey`. */
export function rotatedHostKey(
  clientPrivateKey: string,
  firstHostKey: string,
): { privateKey: string; publicKey: string } {
  const seed = createHmac("sha256", clientPrivateKey.trim())
    .update("molt host key rotation\0")
    .update(publicKeyBlob(firstHostKey))
    .digest();
  return sshKeyPairFromSeed(seed, "molt rotated host key");
}

/** Where a node's sshd keeps the host key molt pins, and how it is told to reload. */
export interface SshdFiles {
  hostKeyFile: string;
  /** Reload by SIGHUP to this pid file's process instead of systemd (an sshd run by hand). */
  pidFile?: string;
}

/** A cloud node: the key cloud-init's sshd drop-in names, sshd run by systemd. */
export const NODE_SSHD: SshdFiles = { hostKeyFile: "/etc/ssh/ssh_host_ed25519_key" };

/**
 * Installs the ed25519 private key given on stdin as the node's host key, after checking
 * it is the one whose public half molt will pin, and makes sshd offer it. Existing
 * sessions (this one) stay up; new ones meet the new key.
 */
export function renderHostKeyInstallScript(publicKey: string, sshd: SshdFiles = NODE_SSHD): string {
  const blob = publicKey.trim().split(/\s+/)[1];
  if (!/^ssh-ed25519 [A-Za-z0-9+/=]+/.test(publicKey.trim()) || !blob)
    throw new Error("the rotated host key must be an ssh-ed25519 public key line");
  return renderScript({
    title: "install the node's next SSH host key (given on stdin) and make sshd offer it",
    // The file cloud-init's sshd drop-in names (HostKey, infra/providers/cloud-common.ts).
    constants: { PUBLIC_KEY_BLOB: blob, HOST_KEY_FILE: sshd.hostKeyFile, SSHD_PID_FILE: sshd.pidFile ?? "" },
    functions: [],
    main: `
local key derived
key=$(cat)
umask 077
# Global, not local: the EXIT trap runs after main has returned.
MOLT_KEY_TMP=$(mktemp "$(dirname "$HOST_KEY_FILE")/.molt-host-key.XXXXXX")
trap 'rm -f -- "\${MOLT_KEY_TMP:-}" "\${MOLT_KEY_TMP:-}.pub"' EXIT
printf '%s\\n' "$key" >"$MOLT_KEY_TMP"
derived=$(ssh-keygen -y -f "$MOLT_KEY_TMP" | awk '{ print $2 }')
if [ "$derived" != "$PUBLIC_KEY_BLOB" ]; then
  log "the host key on stdin is not the one molt pins next: not installing it"
  return 1
fi
printf 'ssh-ed25519 %s molt rotated host key\\n' "$derived" >"$MOLT_KEY_TMP.pub"
chmod 0600 "$MOLT_KEY_TMP"
chmod 0644 "$MOLT_KEY_TMP.pub"
mv -f "$MOLT_KEY_TMP.pub" "$HOST_KEY_FILE.pub"
mv -f "$MOLT_KEY_TMP" "$HOST_KEY_FILE"
if command -v restorecon >/dev/null 2>&1; then
  restorecon "$HOST_KEY_FILE" "$HOST_KEY_FILE.pub"
fi
if [ -n "$SSHD_PID_FILE" ]; then
  kill -HUP "$(cat "$SSHD_PID_FILE")"
else
  systemctl try-reload-or-restart ssh.service sshd.service
fi
log "host key rotated; sshd offers the new key to new connections"
`,
  });
}

export interface RotationOptions {
  /** How long the node may take to answer, first boot included. */
  deadlineMs: number;
  /** Connects (tests pass a fake); SshSession.connect by default. */
  connect?: (target: SshTarget) => Promise<SshSession>;
  /** The node's sshd (NODE_SSHD by default). */
  sshd?: SshdFiles;
}

/**
 * A session to a node pinned to its rotated host key, rotating it first when the node
 * still offers the first one. Returns the session and the public key to pin from now on.
 */
export async function connectRotating(
  target: SshTarget,
  o: RotationOptions,
): Promise<{ session: SshSession; hostKey: string }> {
  const connect = o.connect ?? ((t: SshTarget) => SshSession.connect(t, { readyTimeoutMs: 20_000 }));
  if (!target.privateKey) throw new Error(`internal: rotating the host key of ${target.host} needs the stack's key`);
  const next = rotatedHostKey(target.privateKey, target.hostKey);
  const started = Date.now();
  const first = await connectDuringFirstBoot({ ...target, alsoAccept: [next.publicKey] }, o.deadlineMs, connect);
  if (first.acceptedHostKey === next.publicKey) return { session: first, hostKey: next.publicKey };
  try {
    await first.run(
      `exec bash --norc --noprofile -euo pipefail -c ${shellQuote(renderHostKeyInstallScript(next.publicKey, o.sshd))}`,
      "host key rotation",
      { stdin: next.privateKey },
    );
  } finally {
    first.close();
  }
  // sshd applies the new key once it has reloaded: until then a new connection may still
  // meet the first key, which is no longer accepted.
  const session = await connectDuringFirstBoot(
    { ...target, hostKey: next.publicKey },
    Math.max(30_000, o.deadlineMs - (Date.now() - started)),
    connect,
  );
  return { session, hostKey: next.publicKey };
}

/**
 * Connects while a machine boots: refused connections are retried, and so is a host key
 * other than the pinned ones, since images whose sshd starts before cloud-init installs
 * the pinned key offer their own for a moment. Nothing is sent to a host whose key does
 * not match (the handshake stops at the key), so retrying is safe; at the deadline, a
 * mismatch is reported as one.
 */
export async function connectDuringFirstBoot<S = SshSession>(
  target: SshTarget,
  deadlineMs: number,
  connect: (target: SshTarget) => Promise<S>,
  o: { retryHostKeyMismatch: boolean } = { retryHostKeyMismatch: true },
): Promise<S> {
  let mismatch: HostKeyMismatchError | undefined;
  try {
    return await pollUntil(
      async (miss) => {
        try {
          return await connect(target);
        } catch (e) {
          mismatch = e instanceof HostKeyMismatchError ? e : undefined;
          // Past first boot a different key is a replaced machine, or someone in the middle.
          if (mismatch && !o.retryHostKeyMismatch) throw e;
          return miss(String(e));
        }
      },
      {
        what: `SSH to ${target.host}:${target.port ?? 22}`,
        deadlineMs,
        intervalMs: 100,
        maxIntervalMs: 2_000,
      },
    );
  } catch (e) {
    if (mismatch && o.retryHostKeyMismatch)
      throw new HostKeyMismatchError(
        `${target.host} (it still offered another host key after ${Math.round(deadlineMs / 1000)}s of first boot)`,
      );
    throw e;
  }
}
