// What adoption reports: its refusals (exit 2 and 6) and its events.
/** A check failed: nothing was recorded (exit 2). */
export class AdoptionRefusedError extends Error {
  constructor(
    readonly stackName: string,
    readonly problems: string[],
  ) {
    super(
      `stack ${stackName}: the cluster cannot be adopted; nothing was recorded and nothing on the cluster was ` +
        `changed:\n` +
        problems.map((p) => `  - ${p}`).join("\n"),
    );
    this.name = "AdoptionRefusedError";
  }
}

export interface SeenHostKey {
  host: string;
  port: number;
  /** What presented it: "host" or "bastion". */
  role: "host" | "bastion";
  keyLine: string;
  fingerprint: string;
}

/** Host keys nobody named, not confirmed: nothing was recorded (exit 6). */
export class HostKeysNotConfirmedError extends Error {
  constructor(readonly seen: SeenHostKey[]) {
    super(
      "host keys not confirmed; nothing was recorded. molt saw:\n" +
        seen.map((k) => `  ${k.host}:${k.port}  ${k.keyLine.split(" ")[0]}  ${k.fingerprint}`).join("\n") +
        "\nCheck them on the machines (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), then pass them: " +
        seen.map((k) => `--host-key ${k.host}${k.port === 22 ? "" : `:${k.port}`}=${k.fingerprint}`).join(" ") +
        " (or --known-hosts FILE)",
    );
    this.name = "HostKeysNotConfirmedError";
  }
}

export type AdoptEvent =
  | { type: "host-key"; host: string; port: number; fingerprint: string; trust: string }
  | { type: "check"; check: string; ok: true; detail: string }
  | { type: "recorded"; stack: string; nodes: AdoptedView[] }
  /** Something the user must know that did not stop the command (or its refusal). */
  | { type: "warning"; message: string };

export interface AdoptedView {
  name: string;
  address: string;
  ssh: string;
  etcdVersion: string;
  kubernetesVersion?: string;
  generation: number;
  leader: boolean;
}

export type Refuse = (...problems: string[]) => never;

export function refuseUnless(problems: string[], refuse: Refuse): void {
  if (problems.length) refuse(...problems);
}
