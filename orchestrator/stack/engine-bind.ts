// Engines that die with their molt process. Where the stack's lease is shared between
// machines, a runner that takes over an expired lease must know that the dead run's engine
// is gone too, and it cannot look at another machine's processes. So molt starts the engine
// through `setpriv --pdeathsig KILL` (util-linux): when the molt process dies, however it
// dies, the kernel kills its engine. The engine's dynamic-provider plugin is bound the same
// way to the engine (the nodejs provider does not exit when its engine goes away).
// Where setpriv cannot do it (not Linux, an old util-linux), engines run unbound and the
// lease says so: a lock of an unbound engine on another host is never removed by molt.
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheDir, type Engine } from "./engine";

let setprivOk: boolean | undefined;

function setprivSupportsPdeathsig(): boolean {
  if (setprivOk === undefined) {
    try {
      setprivOk = /--pdeathsig/.test(
        execFileSync("setpriv", ["--help"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }),
      );
    } catch {
      setprivOk = false;
    }
  }
  return setprivOk;
}

function writeIfChanged(path: string, text: string): void {
  if (existsSync(path) && readFileSync(path, "utf8") === text) return;
  writeFileSync(`${path}.tmp`, text, { mode: 0o755 });
  chmodSync(`${path}.tmp`, 0o755);
  renameSync(`${path}.tmp`, path);
}

/**
 * A directory whose bin/ holds `pulumi` and `pulumi-resource-pulumi-nodejs` launchers that
 * start the engine's own binaries bound to their parent; undefined when binding is impossible.
 */
export function boundEngine(engine: Engine): Engine | undefined {
  if (process.platform !== "linux" || !setprivSupportsPdeathsig()) return undefined;
  const root = join(cacheDir(), "bound-engine", engine.version);
  const bin = join(root, "bin");
  mkdirSync(bin, { recursive: true });
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  writeIfChanged(
    join(bin, "pulumi"),
    `#!/bin/sh\n# molt: the Pulumi engine, killed by the kernel when the molt process that started it dies.\n` +
      `exec setpriv --pdeathsig KILL -- ${q(join(engine.binDir, "pulumi"))} "$@"\n`,
  );
  // The dynamic-provider launcher: the engine's own, else the one on PATH.
  const launcher = join(engine.binDir, "pulumi-resource-pulumi-nodejs");
  writeIfChanged(
    join(bin, "pulumi-resource-pulumi-nodejs"),
    `#!/bin/sh\n# molt: the dynamic provider, killed by the kernel when its engine dies.\n` +
      (existsSync(launcher)
        ? `exec setpriv --pdeathsig KILL -- ${q(launcher)} "$@"\n`
        : `PATH=$(printf %s "$PATH" | sed "s|${bin}:||")\n` +
          `exec setpriv --pdeathsig KILL -- pulumi-resource-pulumi-nodejs "$@"\n`),
  );
  return { binDir: bin, version: engine.version };
}

export function canBindEngines(): boolean {
  return process.platform === "linux" && setprivSupportsPdeathsig();
}
