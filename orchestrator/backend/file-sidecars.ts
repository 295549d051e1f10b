// The engine's file:// backend is gocloud's fileblob. It keeps each object's metadata in a
// sidecar, `<object>.attrs`, which it rewrites in place (truncate, then write) on every write
// of the object and reads on every read. An engine killed between the two leaves the sidecar
// empty, and from then on every read of the stack fails with `failed to load checkpoint: EOF`
// (a reader racing a writer sees the same, briefly). The checkpoint itself is never at risk:
// fileblob writes it to a temporary file and renames it.
//
// So molt's engines write no sidecars (`metadata=skip` on the backend URL they get), and the
// broken sidecars others left (a killed engine of an older molt, a hand-run `pulumi`) are
// removed before the stack is opened. Removing one is always safe: no sidecar is what
// fileblob expects of an object it did not write (content type octet-stream, no MD5), and
// nothing in the engine's file backend reads the MD5.
import { readdirSync, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const SKIP = "metadata=skip";

/** The URL the engine gets for a backend: file:// backends without sidecars (above). */
export function engineBackendUrl(url: string): string {
  if (!url.startsWith("file://") || /[?&]metadata=/.test(url)) return url;
  return `${url}${url.includes("?") ? "&" : "?"}${SKIP}`;
}

/** The backend as the user named it (what engineBackendUrl added taken off again). */
export function userBackendUrl(url: string): string {
  if (!url.startsWith("file://")) return url;
  return url.replace(/\?metadata=skip$/, "").replace(/&metadata=skip$/, "");
}

/** The folder of a file:// backend URL (its query left out), or undefined for other backends. */
export function fileBackendDir(url: string): string | undefined {
  if (!url.startsWith("file://")) return undefined;
  return fileURLToPath(url.split("?")[0]);
}

/**
 * Removes the sidecars under the backend's `.pulumi` folder that are not whole JSON (empty or
 * cut short) and returns their paths. The update history and backups are left alone: the
 * engine reads neither when it opens or changes a stack.
 */
export function removeBrokenSidecars(backendDir: string): string[] {
  const removed: string[] = [];
  const walk = (dir: string, top: boolean) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // no .pulumi yet (a new backend), or a folder that vanished meanwhile
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (!(top && (e.name === "history" || e.name === "backups"))) walk(path, false);
      } else if (e.isFile() && e.name.endsWith(".attrs") && !wholeJson(path)) {
        try {
          unlinkSync(path);
          removed.push(path);
        } catch {
          /* removed by another run meanwhile */
        }
      }
    }
  };
  walk(join(backendDir, ".pulumi"), true);
  return removed;
}

function wholeJson(path: string): boolean {
  try {
    JSON.parse(readFileSync(path, "utf8"));
    return true;
  } catch (e) {
    // Unreadable for another reason (permissions): not ours to judge.
    return !(e instanceof SyntaxError);
  }
}
