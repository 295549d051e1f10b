// Azurite, the Azure Storage emulator (npm azurite, a devDependency), serving Blob on a loopback
// port it picks itself, in memory, with one account and a fresh key per server. Credentials
// travel in the environment only.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ContainerClient, StorageSharedKeyCredential } from "@azure/storage-blob";

export interface AzuriteServer {
  /** host:port on loopback. */
  address: string;
  account: string;
  /** The environment a client (molt or the engine) needs: AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY. */
  credentials: { AZURE_STORAGE_ACCOUNT: string; AZURE_STORAGE_KEY: string };
  /** A backend URL for a container (and an optional prefix), as a user writes it for an emulator. */
  url(container: string, prefix?: string): string;
  /** SIGSTOP: it answers nothing (its kernel still accepts connections and buffers requests). */
  freeze(): void;
  /** SIGCONT: it processes what was buffered. */
  thaw(): void;
  stop(): Promise<void>;
}

const BIN = join(__dirname, "..", "..", "..", "node_modules", ".bin", "azurite-blob");

export async function startAzurite(containers: string[]): Promise<AzuriteServer> {
  const account = "moltdev";
  const key = randomBytes(32).toString("base64");
  // Azurite writes nothing with --inMemoryPersistence, but runs in a folder of its own all the same.
  const cwd = mkdtempSync(join(tmpdir(), "molt-azurite-"));
  const child: ChildProcess = spawn(
    process.execPath,
    [
      BIN,
      "--blobHost",
      "127.0.0.1",
      "--blobPort",
      "0",
      "--inMemoryPersistence",
      "--extentMemoryLimit",
      "64",
      "--disableProductStyleUrl",
      "--skipApiVersionCheck",
    ],
    {
      cwd,
      env: { PATH: process.env.PATH ?? "", AZURITE_ACCOUNTS: `${account}:${key}` },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const address = await new Promise<string>((resolve, reject) => {
    let out = "";
    // A deadline, not a wait: it resolves as soon as Azurite listens. Its first start on a cold
    // machine under load (loading its modules from disk) once took more than 15 s in CI.
    const timer = setTimeout(() => {
      // Never left running: its pipes would keep the test process alive after the suite.
      child.kill("SIGKILL");
      rmSync(cwd, { recursive: true, force: true });
      reject(new Error(`azurite-blob did not start within 60 s: ${out}${stderr}`));
    }, 60_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /successfully listens on http:\/\/(\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`azurite-blob exited (${code}): ${out}${stderr}`));
    });
  });
  const cred = new StorageSharedKeyCredential(account, key);
  for (const c of containers) await new ContainerClient(`http://${address}/${account}/${c}`, cred).create();
  return {
    address,
    account,
    credentials: { AZURE_STORAGE_ACCOUNT: account, AZURE_STORAGE_KEY: key },
    url: (container, prefix) => `azblob://${container}${prefix ? `/${prefix}` : ""}?domain=${address}&protocol=http`,
    freeze: () => void child.kill("SIGSTOP"),
    thaw: () => void child.kill("SIGCONT"),
    stop: () =>
      new Promise<void>((resolve) => {
        const done = () => {
          rmSync(cwd, { recursive: true, force: true });
          resolve();
        };
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once("exit", done);
        // Azurite closes gracefully, waiting for idle keep-alive connections: 3 s, then SIGKILL.
        const kill = setTimeout(() => child.kill("SIGKILL"), 3000);
        child.once("exit", () => clearTimeout(kill));
        child.kill("SIGCONT"); // a frozen server would hold SIGTERM until then
        child.kill("SIGTERM");
      }),
  };
}
