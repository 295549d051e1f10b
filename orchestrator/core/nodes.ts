// The node list as molt keeps it in the stack state, and how each node is reached: plain
// data shared by the planner, the program (infra/) and the edges.

/** One entry of the per-node desired-state list (owned by molt, kept in the stack state). */
export interface NodeEntry {
  /**
   * Unique among the stack's nodes: also the hostname, the etcd member name and the Node
   * name. It is derived from the generation, so a node that was rolled back (member
   * removed, machine destroyed, data wiped) may see its name used again by the next surge.
   */
  name: string;
  /**
   * Base image: a lab image name, an AMI id, an Azure image reference or a vSphere template
   * ("adopted" for an adopted node: molt does not know what it was built from).
   */
  image: string;
  /** Kubernetes version (semver, "1.34.2"), or absent for etcd-only lab clusters. */
  kubernetesVersion?: string;
  /** Zone / fault domain / vSphere host group; absent where the provider has none. */
  failureDomain?: string;
  /**
   * Static private address from the configured pool (vSphere `staticAddresses`), chosen once
   * when the entry is made (orchestrator/core/addresses.ts); absent where the provider assigns addresses.
   */
  address?: string;
  role: "control-plane";
  /** Creation order, strictly increasing; the oldest outdated node is retired first. */
  generation: number;
  /** True only for the node that initialises a brand-new cluster. */
  init: boolean;
  /**
   * Set for a node molt did not create (`molt adopt`: KubeOne, kubeadm by hand): it is
   * outdated by definition, the program makes no resource for it, and retiring it resets
   * it over SSH and leaves its machine to its owner.
   */
  adopted?: AdoptedNode;
}

/** What `molt adopt` checked and recorded of a node it did not create. */
export interface AdoptedNode {
  /** Its address on the control-plane network (the host of its etcd peer URL). */
  address: string;
  /** How molt logs in (through molt:ssh.bastion when the stack has one). */
  ssh: { host: string; port: number; user: string };
  /** Its SSH host key, pinned like a molt node's (checked against fingerprints or known_hosts). */
  hostKey: string;
  /** The bastion it was reached through when adopted ("user@host:port"), for the record. */
  bastion?: string;
  /** The etcd server version it ran when adopted. */
  etcdVersion: string;
  /** Where it came from: "kubeone" (terraform output) or "hosts" (a host list). */
  source: "kubeone" | "hosts";
  /**
   * Its machine as the cloud's controller names it (aws:///ZONE/ID, azure:///subscriptions/...),
   * read from the machine's metadata service by `molt adopt`: what takes it out of the API load
   * balancer when it retires.
   */
  providerId?: string;
  /**
   * The machine itself, taken into the stack (`molt adopt --import HOST=ID`, through the
   * engine's import): when the node retires, molt destroys it like one of its own instead
   * of leaving it to its owner. `importId` is the provider's id of it (an EC2 instance id,
   * an Azure VM resource id, a vSphere inventory path, a lab machine's name).
   */
  machine?: { importId: string };
  /**
   * Its keepalived VRRP group for the API endpoint VIP (molt:apiEndpoint mode vip), as
   * `molt adopt` read it: its priority while its checks pass. molt's new nodes join the
   * group above it (core/keepalived-conf.ts); its authentication is never recorded here.
   */
  keepalived?: { priority: number };
}

/** How a node is reached, as recorded in stack outputs for the orchestrator. */
export interface NodeEndpoint {
  name: string;
  privateAddress: string;
  sshHost: string;
  sshPort: number;
  hostPublicKey: string;
  providerId: string;
  /** The login user, when it is not the stack's (an adopted node's, from its installer). */
  sshUser?: string;
}

export interface StoredState {
  nodes: NodeEntry[];
  endpoints: NodeEndpoint[];
  sshUser: string;
  sshPrivateKey?: string;
  apiEndpoint?: string;
}

export interface SshAccessSettings {
  /** Also offer the keys of the ssh-agent at $SSH_AUTH_SOCK. */
  agent: boolean;
  /** Every connection goes through this jump host; it is offered the stack's key too. */
  bastion?: { host: string; port: number; user: string; hostKey: string; agent: boolean };
}
