// Which stack a lab belongs to. A lab's machines share its bridge, subnet and address pool,
// and all but VIP-mode stacks share its HAProxy: a second stack on the same lab would attach
// its API servers to the first one's load balancer, and its destroy would stop it. So a lab
// has one owner, named in `<labRoot>/labs/<lab>/owner.json` (the stack and its backend):
// claimed by molt's preflight before a run changes anything, and by the load balancer when
// it is created (infra/lab/lb-impl.ts); another stack is refused; the owner's load balancer
// delete releases it. A claim whose stack provably holds nothing any more (a file backend
// on this host without that stack, or with the stack emptied by a destroy) is taken over.
import { randomBytes } from "node:crypto";
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import { LabHostError } from "./host";

/** A stack, as a lab's owner: its name and its backend (without credentials or query). */
export interface LabOwner {
  stack: string;
  backend: string;
}

export interface LabClaim extends LabOwner {
  /** When and where the claim was made, for the message that refuses another stack. */
  since: string;
  host: string;
}

/** A second stack on a lab another stack owns: nothing was changed (exit 2). */
export class LabOwnedError extends LabHostError {
  constructor(
    readonly lab: string,
    readonly owner: LabClaim,
    readonly refused: LabOwner,
  ) {
    const by = `PULUMI_BACKEND_URL=${owner.backend} npm run pulumi -- destroy --stack ${owner.stack}`;
    super(
      `lab ${lab} belongs to stack ${owner.stack} (backend ${owner.backend}, claimed ${owner.since} on ` +
        `${owner.host}); stack ${refused.stack}` +
        (refused.backend !== owner.backend ? ` (backend ${refused.backend})` : "") +
        ` may not use it, and nothing was changed. Give stack ${refused.stack} a lab of its own (molt:lab.name, ` +
        `with its own molt:lab.bridge and molt:lab.subnet), or release lab ${lab}: destroy stack ` +
        `${owner.stack} (${by}); if that stack is gone, \`tools/lab/clean.sh ${lab}\` removes what is left of the lab`,
    );
    this.name = "LabOwnedError";
  }
}

/** The owner identity of `stack` in `backend`: a URL without user info, query or trailing slash. */
export function labOwner(stack: string, backend: string): LabOwner {
  const b = backend
    .replace(/^([a-z0-9+.-]+:\/\/)[^@/]*@/i, "$1")
    .replace(/\?.*$/, "")
    .replace(/(.)\/+$/, "$1");
  return { stack, backend: b };
}

export function ownerFile(labRoot: string, lab: string): string {
  return join(labRoot, "labs", lab, "owner.json");
}

const same = (a: LabOwner, b: LabOwner) => a.stack === b.stack && a.backend === b.backend;

/** The lab's claim, or undefined when nobody claimed it; a file that is not a claim is an error. */
export function readLabClaim(labRoot: string, lab: string): LabClaim | undefined {
  const file = ownerFile(labRoot, lab);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  try {
    const c = JSON.parse(text) as Partial<LabClaim>;
    if (typeof c.stack === "string" && typeof c.backend === "string")
      return { stack: c.stack, backend: c.backend, since: String(c.since ?? "?"), host: String(c.host ?? "?") };
  } catch {
    // reported below
  }
  throw new LabHostError(
    `${file} does not name the lab's owning stack; remove it if no stack uses lab ${lab} (tools/lab/clean.sh ${lab})`,
  );
}

/**
 * Makes `owner` the lab's owner, or confirms it is. Atomic: the claim is written whole to a
 * file of its own and linked into place (link(2) fails if a claim is there), so of two stacks
 * claiming a lab at once exactly one wins. Returns what it did; throws LabOwnedError for a
 * lab another stack owns.
 */
export function claimLab(
  labRoot: string,
  lab: string,
  owner: LabOwner,
  gone: (claim: LabClaim) => boolean = ownerHoldsNothing,
): { claimed: "already" | "now" | "taken-over"; previous?: LabClaim } {
  const file = ownerFile(labRoot, lab);
  mkdirSync(join(labRoot, "labs", lab), { recursive: true });
  let takenOver: LabClaim | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const current = readLabClaim(labRoot, lab);
    if (current && same(current, owner)) return { claimed: takenOver ? "taken-over" : "already" };
    if (current) {
      if (!gone(current)) throw new LabOwnedError(lab, current, owner);
      // Changed while it was judged: look again.
      if (!release(file, current)) continue;
      takenOver = current;
    }
    const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
    const claim: LabClaim = { ...owner, since: new Date().toISOString(), host: hostname() };
    writeFileSync(tmp, JSON.stringify(claim, null, 2) + "\n");
    try {
      linkSync(tmp, file);
      return takenOver ? { claimed: "taken-over", previous: takenOver } : { claimed: "now" };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      // Another claim landed in between: read it again.
    } finally {
      unlinkSync(tmp);
    }
  }
  throw new LabHostError(`the claim on lab ${lab} (${file}) kept changing while it was made; run again`);
}

/** Gives the lab up if `owner` holds it; a claim of another stack stays. */
export function releaseLab(labRoot: string, lab: string, owner: LabOwner): boolean {
  const current = readLabClaim(labRoot, lab);
  return !!current && same(current, owner) && release(ownerFile(labRoot, lab), current);
}

/**
 * Removes the claim file if it still holds `expected`: moved aside first (a rename of one
 * name succeeds once), then compared, and put back if another claim had replaced it.
 */
function release(file: string, expected: LabClaim): boolean {
  const aside = `${file}.released.${process.pid}.${randomBytes(4).toString("hex")}`;
  try {
    renameSync(file, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return true;
    throw e;
  }
  let moved: LabClaim | undefined;
  try {
    moved = JSON.parse(readFileSync(aside, "utf8")) as LabClaim;
  } catch {
    moved = undefined;
  }
  if (moved && same(moved, expected) && moved.since === expected.since) {
    unlinkSync(aside);
    return true;
  }
  try {
    linkSync(aside, file);
  } catch {
    // A newer claim is in place: it stands.
  }
  unlinkSync(aside);
  return false;
}

/**
 * Whether the owning stack provably holds nothing: its backend is a folder on this host and
 * has no checkpoint of the stack, or one without resources (a destroyed stack). Other
 * backends cannot be read here: their claims stand until released.
 */
export function ownerHoldsNothing(claim: LabOwner): boolean {
  if (!claim.backend.startsWith("file://")) return false;
  let dir: string;
  try {
    dir = fileURLToPath(claim.backend);
  } catch {
    return false;
  }
  // The project layout (.pulumi/stacks/<project>/<stack>.json) or the legacy one, gzipped or not.
  const stacks = join(dir, ".pulumi", "stacks");
  let projects: string[];
  try {
    projects = readdirSync(stacks, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    projects = [];
  }
  const found = [...projects.map((p) => join(stacks, p, claim.stack)), join(stacks, claim.stack)]
    .flatMap((p) => [`${p}.json`, `${p}.json.gz`])
    .find((p) => existsSync(p));
  if (!found) return true;
  try {
    const raw = readFileSync(found);
    const doc = JSON.parse((found.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8")) as {
      checkpoint?: { latest?: { resources?: { type?: string }[] } };
    };
    const resources = doc.checkpoint?.latest?.resources ?? [];
    return !resources.some((r) => r.type !== "pulumi:pulumi:Stack" && !r.type?.startsWith("pulumi:providers:"));
  } catch {
    return false;
  }
}
