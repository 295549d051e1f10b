// The locks a run can leave in a folder used as a store (a file:// backend, or molt's home
// for backends without one): molt's live leases (a released lease leaves only a deletion
// marker, which is no lock) and the engine's lock files.
import { existsSync } from "node:fs";
import { FileStore } from "../../orchestrator/backend/file";

/** Every live lock under each folder, as `folder: key`; [] when none. */
export async function locksLeft(...folders: string[]): Promise<string[]> {
  const left: string[] = [];
  for (const dir of folders.filter((d) => existsSync(d))) {
    const store = new FileStore(dir);
    const molt = await store.list(".molt/locks");
    const engine = (await store.list(".pulumi/locks")).filter((k) => k.endsWith(".json"));
    left.push(...[...molt, ...engine].map((k) => `${dir}: ${k}`));
  }
  return left.sort();
}
