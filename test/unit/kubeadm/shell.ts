// Test helpers: shellcheck and bash on rendered scripts.
import { spawnSync } from "node:child_process";

export function shellcheck(script: string): string {
  const r = spawnSync("shellcheck", ["--shell=bash", "--severity=style", "-"], { input: script, encoding: "utf8" });
  if (r.error) throw r.error;
  return r.status === 0 ? "" : r.stdout + r.stderr;
}

/** Runs bash with the given script text and stdin; returns stdout, stderr and status. */
export function bash(script: string, stdin = ""): { stdout: string; stderr: string; status: number | null } {
  const r = spawnSync("bash", ["-euo", "pipefail", "-c", script], { input: stdin, encoding: "utf8" });
  if (r.error) throw r.error;
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

/** The script up to (not including) its root dispatch: constants and functions only. */
export function definitionsOf(script: string): string {
  const at = script.indexOf('\nif [ "$(id -u)" -eq 0 ]; then');
  if (at < 0) throw new Error("rendered script has no root dispatch");
  return script.slice(0, at);
}
