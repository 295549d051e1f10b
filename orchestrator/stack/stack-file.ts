// stacks/Pulumi.<stack>.yaml is the user's file (tracked, commented, reviewed) and, at the
// same time, Pulumi's stack settings file. When Pulumi writes it (creating the stack, it
// adds `encryptionsalt`) it re-serializes the whole file: top-level values become strings
// (`molt:replicas: "3"`) and the layout may change. molt keeps the user's text as written
// and adds only the keys Pulumi added.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { parse as parseYaml, stringify } from "yaml";

type Doc = { config?: Record<string, unknown> } & Record<string, unknown>;

function parse(text: string): Doc | undefined {
  try {
    const d = parseYaml(text) as unknown;
    return d && typeof d === "object" ? (d as Doc) : undefined;
  } catch {
    return undefined;
  }
}

/** Pulumi stores every top-level config value as a string; nested values keep their type. */
function sameConfig(a: Doc["config"], b: Doc["config"]): boolean {
  const norm = (c: Doc["config"]) =>
    JSON.stringify(
      Object.entries(c ?? {})
        .map(([k, v]) => [k, v !== null && typeof v !== "object" ? String(v) : v] as const)
        .sort(([x], [y]) => x.localeCompare(y)),
    );
  return norm(a) === norm(b);
}

/**
 * The text to keep after Pulumi rewrote `before` as `after`: `before` plus the top-level
 * keys Pulumi added, when the config itself is unchanged; otherwise undefined (Pulumi's
 * text stands: it changed a value, and that must not be undone).
 */
export function restoredText(before: string, after: string): string | undefined {
  if (before === after) return undefined;
  const b = parse(before);
  const a = parse(after);
  if (!b || !a || !sameConfig(b.config, a.config)) return undefined;
  const added = Object.keys(a).filter((k) => k !== "config" && !(k in b));
  const changed = Object.keys(b).filter((k) => k !== "config" && JSON.stringify(a[k]) !== JSON.stringify(b[k]));
  if (changed.length) return undefined;
  const body = before.endsWith("\n") || before === "" ? before : `${before}\n`;
  return body + added.map((k) => stringify({ [k]: a[k] }, { lineWidth: 0 })).join("");
}

/** Runs `fn` (which may make Pulumi write the stack file at `path`) and keeps the user's text. */
export async function keepingUserText<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const before = existsSync(path) ? readFileSync(path, "utf8") : undefined;
  try {
    return await fn();
  } finally {
    if (before !== undefined && existsSync(path)) {
      const text = restoredText(before, readFileSync(path, "utf8"));
      if (text !== undefined) writeFileSync(path, text);
    }
  }
}
