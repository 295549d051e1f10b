// A lab image's description of itself (tools/lab/build-images.sh writes image.json).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface LabImageMeta {
  name: string;
  kubernetesVersion?: string;
  etcdVersion?: string;
}

export function labImageDir(labRoot: string, image: string): string {
  return join(labRoot, "images", image);
}

/** undefined when there is no such image (or the name could leave the images directory). */
export function readLabImage(labRoot: string, image: string): LabImageMeta | undefined {
  const file = join(labImageDir(labRoot, image), "image.json");
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(image) || !existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as LabImageMeta;
}
