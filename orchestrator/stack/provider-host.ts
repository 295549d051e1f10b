// The node process of a warm dynamic provider (stack/warm-provider.ts): @pulumi/pulumi's own
// dynamic-provider server, loaded once per run, before the first `up` that uses it, so that
// no `up` waits for node to load @pulumi/pulumi (about 0.45 s of every `up` on the lab).
//
// Protocol, on stdio with molt:
//   1. the server prints its port on stdout (as it does for the engine), once loaded;
//   2. before each `up`, molt writes one JSON line on stdin: that `up`'s environment (what
//      the engine would have given the provider it starts: molt's teardown list,
//      stack/edge.ts); the keys the previous line set and this one does not are removed;
//   3. this process sets it and prints "ready"; molt then starts the `up`, which attaches
//      to the port (PULUMI_DEBUG_PROVIDERS).
// Anything else the provider prints goes to stderr, which molt reads as the engine would.
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { createInterface } from "node:readline";

// The engine address the server is started with is not used by the Node.js dynamic provider;
// with an attached provider the engine gives its address in the handshake instead.
process.argv.splice(2, process.argv.length, "127.0.0.1:0");
type Write = (chunk: string | Uint8Array, ...rest: unknown[]) => boolean;
const print = process.stdout.write.bind(process.stdout) as Write;
let portPrinted: () => void;
const portSeen = new Promise<void>((resolve) => (portPrinted = resolve));
let first = true;
// The server's only stdout line is its port; later output (none is expected) goes to stderr.
process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
  if (!first) return (process.stderr.write as Write)(chunk, ...rest);
  first = false;
  printedPort = Number(String(chunk).trim());
  const r = print(chunk, ...rest);
  portPrinted();
  return r;
}) as typeof process.stdout.write;

const lines = createInterface({ input: process.stdin });
let set: string[] = [];
lines.on("line", (line) => {
  const env = JSON.parse(line) as Record<string, string>;
  for (const k of set) if (!(k in env)) delete process.env[k];
  for (const [k, v] of Object.entries(env)) process.env[k] = v;
  set = Object.keys(env);
  // "ready" after the port, whenever the line came.
  void portSeen.then(() => print("ready\n"));
});
// molt went away (killed, or it ended): as a provider the engine starts dies with its engine,
// this one serves the engine attached to it until that engine lets go (an engine outlives
// molt where it is not bound to it, stack/engine-bind.ts), and goes at once if none is.
lines.once("close", () => {
  void portSeen.then(() => {
    const port = portOf();
    const check = () => {
      if (!engineAttached(port)) process.exit(0);
    };
    check();
    setInterval(check, 200);
  });
});

let printedPort = 0;
const portOf = () => printedPort;

/** Whether a connection to `port` is established in this network namespace (/proc/net/tcp). */
function engineAttached(port: number): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address (ADDR:PORT in hex), rem_address, st (01: ESTABLISHED)
      if (f.length > 3 && f[1].endsWith(`:${hex}`) && f[3] === "01") return true;
    }
  }
  return false;
}

// An attached provider is told the engine's address through Attach, which the engine requires
// to succeed; the Node.js dynamic provider answers it "not implemented" (it never calls the
// engine). Its server gets an Attach that accepts, nothing else changed. The SDK's own gRPC
// and protobuf modules: the ones its server is made of.
/* eslint-disable @typescript-eslint/no-require-imports */
const sdk = dirname(require.resolve("@pulumi/pulumi/package.json"));
const grpc = require(require.resolve("@grpc/grpc-js", { paths: [sdk] })) as {
  Server: { prototype: { addService(service: unknown, impl: Record<string, unknown>): void } };
};
const { Empty } = require(require.resolve("google-protobuf/google/protobuf/empty_pb", { paths: [sdk] })) as {
  Empty: new () => unknown;
};
const addService = grpc.Server.prototype.addService;
grpc.Server.prototype.addService = function (this: unknown, service: unknown, impl: Record<string, unknown>) {
  impl.attach = (_call: unknown, callback: (err: null, resp: unknown) => void) => callback(null, new Empty());
  return addService.call(this, service, impl);
};
require("@pulumi/pulumi/cmd/dynamic-provider");
/* eslint-enable @typescript-eslint/no-require-imports */
