// etcd's /version read the way the etcd edge reads it (orchestrator/edges/etcd-version.ts),
// against a real etcd (Debian's, on loopback) that asks for client certificates as kubeadm's
// does: a certificate for DNS:localhost checked by that name, the healthcheck client's
// certificate presented. The lab's rollouts read it through SSH tunnels to etcd 3.6 and 3.7
// (test/long/chain.test.ts).
import * as assert from "node:assert/strict";
import { execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil } from "../../lib/poll";
import { readEtcdVersion } from "../../orchestrator/edges/etcd-version";
import { spawnEtcd } from "../support/etcd-process";
import { freePort } from "../support/s3";

describe("etcd's /version through mutual TLS (a real etcd)", function () {
  this.timeout(60_000);
  let dir: string;
  let etcd: ChildProcess;
  let url: string;
  let tls: { ca: string; cert?: string; key?: string; servername: string };

  /** A CA, a server certificate for DNS:localhost and a client certificate, as kubeadm's etcd PKI has them. */
  function pki(): void {
    const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
    const key = (name: string) =>
      ssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", `${name}.key`);
    key("ca");
    ssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=etcd-ca", "-days", "1", "-out", "ca.crt");
    for (const [name, ext] of [
      ["server", "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth"],
      ["client", "extendedKeyUsage=clientAuth"],
    ]) {
      key(name);
      ssl("req", "-new", "-key", `${name}.key`, "-subj", `/CN=${name}`, "-out", `${name}.csr`);
      writeFileSync(join(dir, `${name}.ext`), ext + "\n");
      ssl(
        "x509",
        "-req",
        "-in",
        `${name}.csr`,
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        `${name}.ext`,
        "-out",
        `${name}.crt`,
      );
    }
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "molt-etcd-version-"));
    pki();
    const [client, peer] = [await freePort(), await freePort()];
    url = `https://127.0.0.1:${client}`;
    etcd = spawnEtcd(dir, url, peer, [
      "--client-cert-auth",
      `--trusted-ca-file=${dir}/ca.crt`,
      `--cert-file=${dir}/server.crt`,
      `--key-file=${dir}/server.key`,
    ]);
    const read = (f: string) => readFileSync(join(dir, f), "utf8");
    tls = { ca: read("ca.crt"), cert: read("client.crt"), key: read("client.key"), servername: "localhost" };
  });
  after(() => {
    etcd?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  // The cluster version is "not_decided" for a moment after the first start; the leader sets it.
  const decided = () =>
    pollUntil(
      async (miss) => {
        const v = await readEtcdVersion(url, tls).catch((e: Error) => void miss(e.message));
        if (v && /^\d+\.\d+\.0$/.test(v.cluster)) return v;
        if (v) miss(`cluster version ${v.cluster}`);
        return undefined;
      },
      { what: "etcd's cluster version to be decided", deadlineMs: 10_000, intervalMs: 100 },
    );

  it("reads the member's server version and the cluster version its leader decided", async () => {
    const v = await decided();
    const [major, minor] = v.server.split(".");
    assert.match(v.server, /^\d+\.\d+\.\d+$/);
    assert.equal(v.cluster, `${major}.${minor}.0`);
  });

  it("fails, saying why, without the client certificate or with another server name", async () => {
    // It answers with the right certificate first, so each refusal below is the TLS one.
    await decided();
    await assert.rejects(readEtcdVersion(url, { ca: tls.ca, servername: "localhost" }));
    await assert.rejects(readEtcdVersion(url, { ...tls, servername: "etcd.example" }), /localhost|altnames|match/i);
  });
});
