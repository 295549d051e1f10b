// Test helpers: shellcheck and bash on rendered scripts.
import { spawnSync } from "node:child_process";

export function shellcheck(script: string): string {
  const r = spawnSync("shellcheck", ["--shell=bash", "--severity=style", "-"], { input: script, encoding: "utf8" });
  if (r.error) throw r.error;
  return r.status === 0 ? "" : r.stdout + r.stderr;
}

/** Runs bash with the given script text and stdin; returns stdout, stderr and status. */
export function bash(script: string, stdin = ""): { stdout: string; stderr: string; status: number | null } {
  // --norc: bash sources /etc/bash.bashrc for `-c` when its stdin is a socket (Node's stdio
  // pipes are socketpairs) and SHLVL < 2, and Debian's bashrc fails under -u ("PS1: unbound
  // variable"): a test run from a shell with SHLVL unset or 0 saw that on stderr.
  const r = spawnSync("bash", ["--norc", "-euo", "pipefail", "-c", script], { input: stdin, encoding: "utf8" });
  if (r.error) throw r.error;
  return { stdout: r.stdout, stderr: r.stderr, status: r.status };
}

/** The script up to (not including) its root dispatch: constants and functions only. */
export function definitionsOf(script: string): string {
  const at = script.indexOf('\nif [ "$(id -u)" -eq 0 ]; then');
  if (at < 0) throw new Error("rendered script has no root dispatch");
  return script.slice(0, at);
}
