// What the suites that adopt a foreign cluster (foreign.ts, kubeone-foreign.ts) and roll it
// share: the stack's config that reaches it through its own HAProxy (and its bastion), the
// installer's ssh-agent for the run, its admin.conf as the host reaches the API, and `molt
// adopt` from its KubeOne-shaped terraform output.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { LabSettings } from "../../infra/lab/settings";
import type { CliRun } from "./cli";
import type { ForeignCluster } from "./foreign";

/** A lab stack of 3 on `image` adopting `c`: its HAProxy is the endpoint, its bastion (if any) the way in. */
export function adoptingStackYaml(c: ForeignCluster, lab: LabSettings, image: string): string {
  const lb = c.lb!;
  return stringify({
    config: {
      "molt:provider": "lab",
      "molt:replicas": 3,
      "molt:image": image,
      "molt:timeouts": { joinSeconds: 300, settleSeconds: 60, drainSeconds: 120 },
      "molt:ssh": {
        agent: true,
        ...(c.bastion ? { bastion: { host: c.bastion.address, hostKey: c.bastion.hostKey } } : {}),
      },
      "molt:lab": {
        name: lab.lab,
        bridge: lab.bridge,
        subnet: lab.subnet,
        ...(lab.isolated ? { isolated: true } : {}),
        loadBalancer: {
          lab: lb.inputs.lab,
          address: lb.endpoint,
          ...(lb.inputs.netns ? { netns: lb.inputs.netns, bind: lb.inputs.bind } : {}),
        },
      },
    },
  });
}

/** SSH_AUTH_SOCK names the installer's agent (for molt's children and this process); the result restores it. */
export function useInstallerAgent(c: ForeignCluster): () => void {
  const saved = process.env.SSH_AUTH_SOCK;
  process.env.SSH_AUTH_SOCK = c.agent.socket;
  return () => {
    if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = saved;
  };
}

/** `node`'s admin.conf with its server the HAProxy as the host reaches it, written to `file` (0600). */
export async function writeHostAdminConf(c: ForeignCluster, node: string, file: string): Promise<void> {
  const conf = (await c.ssh(node, "cat /etc/kubernetes/admin.conf")).replace(
    /server: https:\/\/[^\s]+/,
    `server: https://${c.lb!.hostEndpoint}`,
  );
  writeFileSync(file, conf, { mode: 0o600 });
}

/** `molt adopt --terraform-output --known-hosts` with `c`'s files written into `dir`. */
export function adoptFromTerraform(
  c: ForeignCluster,
  dir: string,
  stack: string,
  cli: (...args: string[]) => Promise<CliRun>,
): Promise<CliRun> {
  const tf = join(dir, "tf.json");
  writeFileSync(tf, c.terraformOutput());
  const kh = join(dir, "known_hosts");
  writeFileSync(kh, c.knownHosts());
  return cli("adopt", "--stack", stack, "--json", "--terraform-output", tf, "--known-hosts", kh);
}
