// Writing a release into a stack's config file (stacks/Pulumi.<stack>.yaml), the way a person
// would: the user's comments and layout stay, only molt:release, molt:image and (when the
// release names one) molt:kubernetesVersion change. The change is shown as a line diff.
import { parseDocument } from "yaml";
import type { Release } from "./release";

/** The file's text with `release` written in for stack `stack`; throws unless it is a YAML map with `config:`. */
export function withRelease(text: string, release: Release, stack: string): string {
  const doc = parseDocument(text);
  if (doc.errors.length) throw new Error(`not valid YAML: ${doc.errors[0].message}`);
  if (!doc.has("config")) throw new Error("it has no `config:` map");
  const image = release.images[stack];
  if (image === undefined) throw new Error(`release ${release.name} has no image for stack ${stack}`);
  doc.setIn(["config", "molt:image"], image);
  const provider = doc.getIn(["config", "molt:provider"]);
  if (release.kubernetesVersion !== undefined) {
    // Lab images carry their version (the key is optional there); clouds need it.
    if (provider !== "lab" || doc.hasIn(["config", "molt:kubernetesVersion"]))
      doc.setIn(["config", "molt:kubernetesVersion"], release.kubernetesVersion);
  } else if (doc.hasIn(["config", "molt:kubernetesVersion"])) {
    doc.deleteIn(["config", "molt:kubernetesVersion"]);
  }
  // A chained release's steps as this stack names them (molt:images); none: no chain here.
  // The lab's images say their version; on clouds it is written beside the image.
  const chain = Object.entries(release.chain ?? {}).flatMap(([minor, st]) =>
    st.images[stack] !== undefined ? [[minor, st.images[stack], st.kubernetesVersion] as const] : [],
  );
  if (chain.length) {
    doc.setIn(
      ["config", "molt:images"],
      doc.createNode(
        Object.fromEntries(
          chain.map(([minor, image, version]) => [
            minor,
            provider === "lab" || version === undefined ? image : { image, kubernetesVersion: version },
          ]),
        ),
      ),
    );
  } else if (doc.hasIn(["config", "molt:images"])) {
    doc.deleteIn(["config", "molt:images"]);
  }
  doc.setIn(
    ["config", "molt:release"],
    doc.createNode({
      name: release.name,
      ...(release.kubernetesVersion ? { kubernetesVersion: release.kubernetesVersion } : {}),
      ...(release.etcdVersion ? { etcdVersion: release.etcdVersion } : {}),
      images: release.images,
      ...(release.chain ? { chain: release.chain } : {}),
    }),
  );
  return doc.toString({ lineWidth: 0 });
}

/** A unified-style line diff (`-` removed, `+` added, two lines of context), empty when equal. */
export function lineDiff(before: string, after: string, file: string): string {
  if (before === after) return "";
  const a = before.split("\n");
  const b = after.split("\n");
  // Longest common subsequence over lines: config files are small.
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const ops: { op: " " | "-" | "+"; line: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      ops.push({ op: " ", line: a[i] });
      i++;
      j++;
    } else if (j < b.length && (i >= a.length || lcs[i][j + 1] >= lcs[i + 1][j])) ops.push({ op: "+", line: b[j++] });
    else ops.push({ op: "-", line: a[i++] });
  }
  const keep = ops.map((o, k) => o.op !== " " || ops.slice(Math.max(0, k - 2), k + 3).some((x) => x.op !== " "));
  const out = [`--- ${file}`, `+++ ${file} (promoted)`];
  ops.forEach((o, k) => {
    if (keep[k]) out.push(`${o.op}${o.line}`);
    else if (k > 0 && keep[k - 1]) out.push("…");
  });
  return out.join("\n") + "\n";
}
