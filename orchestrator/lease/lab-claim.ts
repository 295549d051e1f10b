// A lab stack's lab is its own (infra/lab/owner.ts). A run that may change the stack claims
// the lab before it changes anything, so a second stack on the same molt:lab.name is refused
// (LabOwnedError, exit 2) with nothing changed; and the stack's load balancer carries the
// owner, so its create claims the lab too and its delete leaves another stack's running.
import type { StackConfig } from "../config";
import { claimLab, labOwner } from "../../infra/lab/owner";

/** `cfg` with its lab's owner: this stack in this backend (no change to cfg without a lab). */
export function withLabOwner(cfg: StackConfig, stack: string, backend: string): StackConfig {
  return cfg.lab ? { ...cfg, lab: { ...cfg.lab, owner: labOwner(stack, backend) } } : cfg;
}

/**
 * Claims the stack's lab, or confirms the claim; refuses a lab another stack owns. A claim
 * whose stack holds nothing any more is taken over, and `warn` says so.
 */
export function claimStackLab(
  cfg: StackConfig,
  stack: string,
  backend: string,
  warn: (message: string) => void,
): StackConfig {
  const owned = withLabOwner(cfg, stack, backend);
  if (!owned.lab?.owner) return owned;
  const r = claimLab(owned.lab.labRoot, owned.lab.lab, owned.lab.owner);
  if (r.previous)
    warn(
      `lab ${owned.lab.lab} was claimed by stack ${r.previous.stack} (${r.previous.backend}, ${r.previous.since}), ` +
        `which holds nothing any more: it is stack ${stack}'s now`,
    );
  return owned;
}
