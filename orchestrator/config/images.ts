// molt:images: the image of each Kubernetes minor on the way to molt:kubernetesVersion, so a
// target more than one minor ahead is reached in steps (orchestrator/core/plan/chain.ts).
// Keys are minors ("1.36"); a value is the image as the provider names it (a lab image, an
// AMI, an Azure image reference, a vSphere template). On clouds the image does not say which
// Kubernetes it runs, so there a value is { image, kubernetesVersion }; a lab image says it
// itself (its image.json).
import type { ChainImage } from "../core/model";
import { compareMinors, compareVersions, fullVersionOf, minorName, minorOf } from "../core/plan/versions";
import type { ImagesSection } from "./schema";

/** One entry as written; the lab fills the version in from the image (orchestrator/config/index.ts resolveLabImage). */
export interface ImageEntry {
  minor: string;
  image: string;
  kubernetesVersion?: string;
}

export function imageEntries(section: ImagesSection | undefined): ImageEntry[] {
  return Object.entries(section ?? {})
    .map(([minor, v]) =>
      typeof v === "string" ? { minor, image: v } : { minor, image: v.image, kubernetesVersion: v.kubernetesVersion },
    )
    .sort((a, b) => compareMinors(minorKey(a.minor), minorKey(b.minor)));
}

// Keys are "MAJOR.MINOR" (schema.ts); one that is not (never past the schema) sorts last.
const minorKey = (m: string) => minorOf(m) ?? { major: Number.MAX_SAFE_INTEGER, minor: 0 };

/**
 * What is wrong with the entries against the target (molt:image and the version it runs):
 * each entry's version of its own minor, none above the target, the target's own minor
 * naming molt:image. Each problem says the key, what is wrong and what to write.
 */
export function chainImagesProblems(
  entries: ChainImage[],
  target: { image: string; kubernetesVersion?: string },
): string[] {
  const problems: string[] = [];
  const t = fullVersionOf(target.kubernetesVersion);
  if (!t) {
    problems.push(
      "molt:images: a chained upgrade needs a Kubernetes target: set molt:kubernetesVersion (on the lab, a k8s-* " +
        "molt:image), or remove molt:images",
    );
    return problems;
  }
  for (const e of entries) {
    const key = `molt:images."${e.minor}"`;
    const v = fullVersionOf(e.kubernetesVersion);
    if (!v || minorName(v) !== e.minor) {
      problems.push(`${key}: ${e.image} runs Kubernetes ${e.kubernetesVersion}, not a ${e.minor} version`);
      continue;
    }
    if (v.major !== t.major || v.minor > t.minor)
      problems.push(
        `${key}: above the target Kubernetes ${target.kubernetesVersion} (molt:kubernetesVersion): a chain only ` +
          `goes up to it; remove the entry`,
      );
    else if (v.minor === t.minor && (e.image !== target.image || compareVersions(v, t) !== 0))
      problems.push(
        `${key}: the target's minor is molt:image (${target.image}, Kubernetes ${target.kubernetesVersion}), but ` +
          `this names ${e.image} (Kubernetes ${e.kubernetesVersion}); remove the entry or make the two the same`,
      );
  }
  return problems;
}

/** The cloud form: every entry has its version (the image cannot say it). */
export function cloudImageProblems(
  entries: ImageEntry[],
  imageProblem: (image: string) => string | undefined,
): string[] {
  const problems: string[] = [];
  for (const e of entries) {
    const key = `molt:images."${e.minor}"`;
    if (e.kubernetesVersion === undefined)
      problems.push(
        `${key}: on clouds write { image: ${e.image}, kubernetesVersion: ${e.minor}.<patch> }: kubeadm installs ` +
          "or verifies the exact version, which the image name does not say",
      );
    const p = imageProblem(e.image);
    if (p) problems.push(`${key}: ${p}`);
  }
  return problems;
}
