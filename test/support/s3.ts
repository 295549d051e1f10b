// The lab's S3-compatible server (tools/toolchain/s3, built by tools/setup.sh) on loopback,
// with a fresh key pair per server. Credentials travel in the environment only.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { cacheDir } from "../../orchestrator/stack/engine";

export interface S3Server {
  /** host:port on loopback. */
  address: string;
  /** The access key pair it accepts (as the environment of a client). */
  credentials: { AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string };
  /** A backend URL for a bucket (and an optional prefix), as a user writes it for an S3-compatible store. */
  url(bucket: string, prefix?: string): string;
  /** SIGSTOP: it answers nothing (its kernel still accepts connections and buffers requests). */
  freeze(): void;
  /** SIGCONT: it processes what was buffered. */
  thaw(): void;
  stop(): Promise<void>;
}

export function s3ServerBinary(): string {
  const bin = join(cacheDir(), "toolchain", "molt-s3", "bin", "molt-s3");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run tools/setup.sh (or tools/setup-s3.sh)`);
  return bin;
}

export async function startS3Server(buckets: string[]): Promise<S3Server> {
  const credentials = {
    AWS_ACCESS_KEY_ID: `molt${randomBytes(6).toString("hex")}`,
    AWS_SECRET_ACCESS_KEY: randomBytes(24).toString("base64url"),
  };
  const child: ChildProcess = spawn(
    s3ServerBinary(),
    buckets.flatMap((b) => ["-bucket", b]),
    {
      env: { PATH: process.env.PATH ?? "", ...credentials },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const address = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`molt-s3 did not start within 10 s: ${stderr}`)), 10_000);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`molt-s3 exited (${code}): ${stderr}`));
    });
  });
  return {
    address,
    credentials,
    url: (bucket, prefix) =>
      `s3://${bucket}${prefix ? `/${prefix}` : ""}?endpoint=http://${address}&s3ForcePathStyle=true&region=us-east-1` +
      "&response_checksum_validation=when_required",
    freeze: () => void child.kill("SIGSTOP"),
    thaw: () => void child.kill("SIGCONT"),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGCONT"); // a frozen server would hold SIGTERM until then
        child.kill("SIGTERM");
      }),
  };
}

/** A loopback port nothing listens on (bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}
