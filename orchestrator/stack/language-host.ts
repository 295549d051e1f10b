// molt's Node.js language host: what the engine starts as `pulumi-language-nodejs` when
// `pulumi` runs molt's project by hand (`npm run pulumi -- preview --stack lab`).
//
// molt itself never needs one: the Automation API runs the program in molt's own process
// (an in-process language server). Pulumi's Go language host cannot be had here (its Go
// module is refused by the module proxy), so this host serves the engine the same
// LanguageRuntime the Automation API serves for inline programs, from @pulumi/pulumi itself:
// it loads the project's `main` module and runs its default export as the stack's program.
// Started by the launcher tools/setup-engine.sh writes next to the engine.
import { dirname, isAbsolute, resolve } from "node:path";

type Callback = (err: Error | null | undefined, resp?: unknown) => void;
type Call = { request: Record<string, () => unknown> };
type Program = () => Promise<Record<string, unknown> | void>;

/* eslint-disable @typescript-eslint/no-require-imports */
const sdk = dirname(require.resolve("@pulumi/pulumi/package.json"));
// The gRPC library of the SDK itself (the version its generated services were built with).
const grpc = require(require.resolve("@grpc/grpc-js", { paths: [sdk] })) as {
  Server: new (o?: object) => {
    addService(s: unknown, impl: object): void;
    bindAsync(addr: string, creds: unknown, cb: (err: Error | null, port: number) => void): void;
  };
  ServerCredentials: { createInsecure(): unknown };
};
const { LanguageRuntimeService } = require("@pulumi/pulumi/proto/language_grpc_pb") as {
  LanguageRuntimeService: unknown;
};
const { LanguageServer } = require("@pulumi/pulumi/automation/server") as {
  LanguageServer: new (program: Program) => {
    program: Program;
    run(call: Call, cb: Callback): Promise<void>;
    getRequiredPlugins(call: Call, cb: Callback): void;
    getPluginInfo(call: Call, cb: Callback): void;
  };
};
const { grpcChannelOptions } = require("@pulumi/pulumi/runtime") as { grpcChannelOptions?: object };
/* eslint-enable @typescript-eslint/no-require-imports */

/** The project's program: `main` of Pulumi.yaml, relative to the program directory. */
export function programPath(req: Record<string, () => unknown>): string {
  const info = req.getInfo?.() as { getProgramDirectory(): string; getEntryPoint(): string } | undefined;
  const dir = info?.getProgramDirectory() || (req.getPwd?.() as string) || process.cwd();
  const entry = info?.getEntryPoint() || (req.getProgram?.() as string) || ".";
  return isAbsolute(entry) ? entry : resolve(dir, entry);
}

class HostedLanguageServer extends LanguageServer {
  constructor() {
    super(async () => {
      throw new Error("internal: no program loaded");
    });
  }

  override async run(call: Call, cb: Callback): Promise<void> {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const mod = require(programPath(call.request)) as { default?: unknown } | Program;
      const program = typeof mod === "function" ? mod : mod.default;
      if (typeof program !== "function")
        throw new Error(`${programPath(call.request)} exports no program (a default export that is a function)`);
      this.program = program as Program;
    } catch (e) {
      return cb(e as Error);
    }
    return super.run(call, cb);
  }
}

async function main(): Promise<void> {
  const server = new grpc.Server({ ...(grpcChannelOptions ?? {}) });
  server.addService(LanguageRuntimeService, new HostedLanguageServer());
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? rej(err) : res(p))),
  );
  // The engine reads the port from the first line of stdout, then connects.
  process.stdout.write(`${port}\n`);
}

if (require.main === module) {
  main().catch((e: Error) => {
    process.stderr.write(`pulumi-language-nodejs (molt): ${e.message}\n`);
    process.exit(1);
  });
}
