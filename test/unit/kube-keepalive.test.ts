// The Kubernetes edge's connections: a pass makes about ten calls per node through SSH
// tunnels, and each new connection costs a channel and a TLS handshake. The calls go over
// kept-alive connections (the admin client's carry the admin credentials), and a health read
// that meets a kept connection the server had closed is tried once more on a new one.
// Real HTTPS servers on loopback with certificates made by openssl; the tunnel is the
// loopback port itself.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, Agent, type Server } from "node:https";
import type { TLSSocket } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { apiClientsOver, get, k8s, KubeCallTimeoutError } from "../../orchestrator/edges/kube-support";
import { KubeAccess } from "../../orchestrator/edges/kube";
import type { SessionPool } from "../../orchestrator/edges/sessions";

interface Pki {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A CA, a serving certificate for "kubernetes" (as kubeadm's) and a client certificate, by openssl. */
function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), "molt-keepalive-"));
  try {
    const sh = (script: string) => execFileSync("sh", ["-ec", script], { cwd: dir, stdio: "pipe" });
    const newKey = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    const sign = "openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 1";
    sh(`
      openssl req -x509 ${newKey} -keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca
      openssl req ${newKey} -keyout server.key -out server.csr -subj /CN=kube-apiserver
      printf 'subjectAltName=DNS:kubernetes\\n' > san.ext
      ${sign} -in server.csr -extfile san.ext -out server.crt
      openssl req ${newKey} -keyout client.key -out client.csr -subj /O=system:masters/CN=kubernetes-admin
      ${sign} -in client.csr -out client.crt
    `);
    const r = (f: string) => readFileSync(join(dir, f), "utf8");
    return {
      ca: r("ca.crt"),
      serverCert: r("server.crt"),
      serverKey: r("server.key"),
      clientCert: r("client.crt"),
      clientKey: r("client.key"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Served {
  server: Server;
  port: number;
  /** TLS connections accepted. */
  connections: number;
  /** The client certificate's CN of each request ("" without one). */
  clients: string[];
}

/**
 * An HTTPS server answering every GET with a JSON body. `dropSecond`: the second request on a
 * connection gets no answer, its connection is cut (a kept connection the server had closed).
 */
async function serve(pki: Pki, o: { dropSecond?: boolean; silent?: boolean } = {}): Promise<Served> {
  const served = { connections: 0, clients: [] as string[] } as Served;
  const perSocket = new WeakMap<object, number>();
  const server = createServer(
    { cert: pki.serverCert, key: pki.serverKey, ca: pki.ca, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const sock = req.socket as TLSSocket;
      if (o.silent) return; // a server that stopped answering, its connection kept open
      const n = (perSocket.get(sock) ?? 0) + 1;
      perSocket.set(sock, n);
      if (o.dropSecond && n === 2) {
        sock.destroy();
        return;
      }
      const peer = sock.getPeerCertificate();
      served.clients.push(peer && typeof peer.subject?.CN === "string" ? peer.subject.CN : "");
      res.setHeader("content-type", "application/json");
      res.end(req.url?.startsWith("/api/v1/nodes") ? JSON.stringify({ kind: "NodeList", items: [] }) : "ok");
    },
  );
  server.on("secureConnection", () => served.connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  served.server = server;
  served.port = (server.address() as AddressInfo).port;
  return served;
}

const stop = (s: Served) =>
  new Promise<void>((resolve) => {
    s.server.closeAllConnections();
    s.server.close(() => resolve());
  });

describe("Kubernetes edge connections (kept alive)", function () {
  this.timeout(30_000);
  let pki: Pki;
  before(() => (pki = makePki()));

  it("health reads through one agent share one connection; each read without it opens its own", async () => {
    const s = await serve(pki);
    const agent = new Agent({ keepAlive: true });
    try {
      const tls = { ca: pki.ca, servername: "kubernetes" };
      for (let i = 0; i < 5; i++) assert.equal((await get(s.port, "/readyz", tls, agent)).status, 200);
      assert.equal(s.connections, 1);
      // A fresh agent per call (what client-node does for every API call): a handshake each.
      for (let i = 0; i < 3; i++)
        assert.equal((await get(s.port, "/readyz", tls, new Agent({ keepAlive: true }))).status, 200);
      assert.equal(s.connections, 4);
    } finally {
      agent.destroy();
      await stop(s);
    }
  });

  it("a kept connection the server cut is not a failed read: the read goes again on a new one", async () => {
    const s = await serve(pki, { dropSecond: true });
    const agent = new Agent({ keepAlive: true });
    try {
      const tls = { ca: pki.ca, servername: "kubernetes" };
      assert.equal((await get(s.port, "/readyz", tls, agent)).status, 200);
      const again = await get(s.port, "/readyz", tls, agent);
      assert.equal(again.status, 200, again.error);
      assert.equal(s.connections, 2, "the second read went over a new connection");
    } finally {
      agent.destroy();
      await stop(s);
    }
  });

  it("a read on a new connection that fails is reported, not tried again", async () => {
    const s = await serve(pki);
    const port = s.port;
    await stop(s);
    const agent = new Agent({ keepAlive: true });
    try {
      const r = await get(port, "/readyz", { ca: pki.ca, servername: "kubernetes" }, agent);
      assert.equal(r.status, 0);
      assert.match(r.error ?? "", /ECONNREFUSED/);
    } finally {
      agent.destroy();
    }
  });

  it("an API call to a server that stops answering fails at its deadline (it waited forever)", async () => {
    const s = await serve(pki, { silent: true });
    const agent = new Agent({
      keepAlive: true,
      ca: pki.ca,
      cert: pki.clientCert,
      key: pki.clientKey,
      servername: "kubernetes",
    });
    try {
      const { core } = apiClientsOver(await k8s(), `https://127.0.0.1:${s.port}`, agent, 300);
      const t = Date.now();
      await assert.rejects(
        core.listNode(),
        (e: Error) =>
          e instanceof KubeCallTimeoutError &&
          e.name !== "AbortError" && // what molt's acts read as the run being cancelled
          e.message === `the API server at https://127.0.0.1:${s.port} did not answer listNode within 0.3 s`,
      );
      const ms = Date.now() - t;
      assert.ok(ms >= 250 && ms < 5_000, `failed after ${ms} ms`);
      assert.equal(s.connections, 1, "the request reached the server");
    } finally {
      agent.destroy();
      await stop(s);
    }
  });

  it("the API clients of a node keep their connection across passes and present the admin certificate", async () => {
    const s = await serve(pki);
    const b64 = (t: string) => Buffer.from(t).toString("base64");
    const adminConf = [
      "apiVersion: v1",
      "clusters:",
      `- cluster: {certificate-authority-data: ${b64(pki.ca)}, server: "https://lb:6443"}`,
      "  name: test",
      "users:",
      `- user: {client-certificate-data: ${b64(pki.clientCert)}, client-key-data: ${b64(pki.clientKey)}}`,
      "  name: admin",
    ].join("\n");
    let forwards = 0;
    let closed = 0;
    // The node's session: admin.conf for `cat`, and its "tunnels" are the server's port.
    const ssh = {
      target: { user: "root" },
      exec: async () => ({ code: 0, stdout: adminConf, stderr: "" }),
      forward: async () => {
        forwards++;
        return { port: s.port, close: async () => void closed++ };
      },
    };
    const pool = { nodes: () => ["n1"], get: () => ssh, onDrop: () => undefined } as unknown as SessionPool;
    const kube = await KubeAccess.open(pool);
    try {
      for (let pass = 0; pass < 3; pass++) {
        const { core } = await kube.api("n1");
        await Promise.all([core.listNode(), core.listNode()]);
        await core.listNode();
      }
      assert.equal(forwards, 3, "one set of tunnels (API server, controller-manager, scheduler)");
      assert.ok(s.connections <= 2, `${s.connections} TLS connections for 9 calls (at most the 2 run at once)`);
      assert.deepEqual(new Set(s.clients), new Set(["kubernetes-admin"]));
      assert.equal(s.clients.length, 9);
    } finally {
      await kube.close();
      await stop(s);
    }
    assert.equal(closed, 3, "closing the edge closes its tunnels");
  });
});
