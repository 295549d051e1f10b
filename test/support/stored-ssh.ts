// An SSH session to a node of a stack, from what its stored state records (the login user,
// the stack's key, the node's pinned host key): how the lab suites look at a machine.
import { SshSession } from "../../infra/remote/ssh";
import type { NodeEndpoint, StoredState } from "../../orchestrator/core/nodes";

/** A session to `node` (by default the state's first), logged in as molt logs in. */
export function sshToStored(st: StoredState, node: NodeEndpoint = st.endpoints[0]): Promise<SshSession> {
  if (!st.sshPrivateKey) throw new Error("the stored state holds no SSH key");
  return SshSession.connect({
    host: node.sshHost,
    port: node.sshPort,
    user: st.sshUser,
    privateKey: st.sshPrivateKey,
    hostKey: node.hostPublicKey,
  });
}
