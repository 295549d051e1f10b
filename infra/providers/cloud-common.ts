// What the AWS, Azure and vSphere nodes share: the component inputs, the cloud-init user
// data that installs the pre-generated SSH host key (so the very first connection is
// already pinned), and failure-domain lookups that fail with a useful message.
import { accessInputs } from "../remote/access";
import * as pulumi from "@pulumi/pulumi";
import { utils } from "ssh2";
import { stringify } from "yaml";
import type { ControlPlaneNodeOutputs, HostKeyPair, SshSettings } from "../node";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import type { JoinMaterial } from "../kubeadm/join-material";
import type { HostFilesFrom } from "../kubeadm/host-files-resource";
import type { ConnectionArgs } from "../remote/command";
import type { KubeadmBootstrapSettings } from "../kubeadm/settings";

/** The inputs every cloud ControlPlaneNode takes; `settings` is the provider's own. */
export interface CloudControlPlaneNodeArgs<Settings> {
  node: NodeEntry;
  ssh: SshSettings;
  hostKey: HostKeyPair;
  bootstrap: KubeadmBootstrapSettings;
  /** For a joining node, at creation: see infra/kubeadm/join-material.ts. */
  joinMaterial?: pulumi.Input<JoinMaterial>;
  /** Or a healthy control-plane node the join material is obtained from, at creation. */
  seed?: pulumi.Input<ConnectionArgs>;
  /** See KubeadmBootstrapArgs.joinedAlready (infra/kubeadm/bootstrap.ts). */
  joinedAlready?: boolean;
  /** The cluster's host files, copied from a healthy node before the join (infra/kubeadm/host-files.ts). */
  hostFiles?: HostFilesFrom;
  /** Bootstrapped only after this (the previous node's bootstrap): joins happen one at a time. */
  after?: pulumi.Resource;
  settings: Settings;
}

/**
 * Options of a node's machine resource that keep its first-boot data (cloud-init: login
 * user, authorized key, host key) as it was at creation. cloud-init reads it once, so a
 * changed molt:ssh or a newer molt's cloud-init could not reach the node anyway; without
 * this, the next `up` would replace (or stop and restart) every existing machine at once.
 * New settings reach new nodes, through a rollout.
 */
export function keepFirstBootData(paths: string[]): pulumi.CustomResourceOptions {
  return { ignoreChanges: paths };
}

export interface CloudInitArgs {
  hostname: string;
  user: string;
  authorizedKey: string;
  hostKey: { privateKey: string; publicKey: string };
}

/**
 * cloud-config that creates the login user (key only, password-less sudo), sets the
 * hostname to the node name, and replaces the image's host keys with the given ed25519
 * key. sshd is restricted to that one key, so no client can be offered another type
 * (and images that regenerate missing keys at boot do not change what is offered).
 */
export function renderCloudInit(a: CloudInitArgs): string {
  if (a.user === "root") {
    throw new Error(
      "ssh.user must not be root on cloud nodes: cloud images disable root login; use the image's admin user (molt " +
        "uses sudo)",
    );
  }
  if (!/^ssh-ed25519 [A-Za-z0-9+/=]+( .*)?$/.test(a.hostKey.publicKey.trim())) {
    throw new Error("hostKey.publicKey must be an ssh-ed25519 public key line");
  }
  const config = {
    hostname: a.hostname,
    preserve_hostname: false,
    manage_etc_hosts: true,
    ssh_pwauth: false,
    disable_root: true,
    users: [
      {
        name: a.user,
        shell: "/bin/bash",
        lock_passwd: true,
        sudo: "ALL=(ALL) NOPASSWD:ALL",
        ssh_authorized_keys: [a.authorizedKey.trim()],
      },
    ],
    ssh_deletekeys: true,
    ssh_genkeytypes: [],
    ssh_keys: {
      ed25519_private: a.hostKey.privateKey.endsWith("\n") ? a.hostKey.privateKey : `${a.hostKey.privateKey}\n`,
      ed25519_public: a.hostKey.publicKey.trim(),
    },
    write_files: [
      {
        path: "/etc/ssh/sshd_config.d/10-molt-host-key.conf",
        permissions: "0644",
        content:
          "# molt: offer only the pre-generated ed25519 host key that clients pin\nHostKey " +
          "/etc/ssh/ssh_host_ed25519_key\n",
      },
    ],
    runcmd: [["systemctl", "try-reload-or-restart", "ssh.service", "sshd.service"]],
  };
  return `#cloud-config\n${stringify(config, { lineWidth: 0 })}`;
}

/** The SSH connection to a built node, pinned to its host key (a seed for joining nodes). */
export function connectionOf(node: ControlPlaneNodeOutputs, args: { ssh: SshSettings }): pulumi.Output<ConnectionArgs> {
  return pulumi.output({
    host: node.sshHost,
    port: node.sshPort,
    user: args.ssh.user,
    privateKey: pulumi.secret(args.ssh.privateKey),
    hostKey: node.hostPublicKey,
    ...accessInputs(args.ssh.access, args.ssh.privateKey),
  });
}

/** The node's user data as a secret (it holds the host private key). */
export function cloudInitUserData(node: NodeEntry, ssh: SshSettings, hostKey: HostKeyPair): pulumi.Output<string> {
  return pulumi.secret(
    pulumi
      .all([ssh.publicKey, hostKey.privateKey, hostKey.publicKey])
      .apply(([authorizedKey, privateKey, publicKey]) =>
        renderCloudInit({ hostname: node.name, user: ssh.user, authorizedKey, hostKey: { privateKey, publicKey } }),
      ),
  );
}

/**
 * The authorized_keys line of an OpenSSH private key (the public half is not secret).
 * Refuses keys molt cannot use unattended (passphrase-protected, or not a private key).
 */
export function publicKeyOfPrivateKey(privateKey: string): string {
  const parsed = utils.parseKey(privateKey.trim());
  if (parsed instanceof Error) {
    throw new Error(
      `molt:ssh.privateKey is not a usable SSH private key (${parsed.message}); molt needs an unencrypted OpenSSH ` +
        `private key, kept encrypted as a Pulumi secret`,
    );
  }
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key.isPrivateKey())
    throw new Error("molt:ssh.privateKey holds a public key; set the private key (as a Pulumi secret)");
  return `${key.type} ${key.getPublicSSH().toString("base64")}`;
}

/** The per-domain setting of a node, or a message naming the domains that exist. */
export function settingForDomain<T>(node: NodeEntry, byDomain: Record<string, T>, what: string): T {
  const domain = node.failureDomain;
  const known = Object.keys(byDomain);
  if (domain === undefined) {
    if (known.length === 1) return byDomain[known[0]];
    throw new Error(
      `node ${node.name} has no failureDomain, but ${what} is configured for several: ${known.join(", ")}`,
    );
  }
  if (!Object.prototype.hasOwnProperty.call(byDomain, domain)) {
    throw new Error(
      `node ${node.name} is in failure domain ${JSON.stringify(domain)}, which has no ${what}; configured: ` +
        `${known.join(", ") || "none"}`,
    );
  }
  return byDomain[domain];
}

/** Tags every cloud resource of a node carries, for operators and cleanup. */
export function nodeTags(node: NodeEntry, clusterName: string): Record<string, string> {
  return {
    "molt.io/cluster": clusterName,
    "molt.io/node": node.name,
    "molt.io/generation": String(node.generation),
    "molt.io/role": node.role,
  };
}
