// A local server that speaks AWS's query protocol, as EC2 and Elastic Load Balancing do:
// form-encoded POSTs (Action=..., Version=..., list members as Name.N or Name.member.N), signed
// with SigV4, answered in XML. A fake service gives one handler per action and its own error
// document; the server reads each request once (its fields, who signed it, for which region).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface QueryRequest {
  /** The form's fields. */
  params: Record<string, string>;
  /** SigV4's credential scope: the access key id that signed it, and the region ("" when unsigned). */
  accessKeyId: string;
  region: string;
}

/** What a handler throws for an error answer (AWS's code and message; status 400 unless told). */
export interface QueryFault {
  code: string;
  message: string;
  status?: number;
}

export interface QueryService {
  /**
   * The result XML per action; where two API versions share an action's name, per
   * "<Version> <Action>" (looked up first).
   */
  handlers: Record<string, (r: QueryRequest) => string>;
  /** The service's error document. */
  error(code: string, message: string): string;
  /** How it refuses an unsigned request (EC2: 401 AuthFailure, ELB: 403 MissingAuthenticationToken). */
  unsigned: { status: number; code: string };
  /** Asked before the handler: a refusal that stands for its answer (AccessDenied). */
  refuse?(r: QueryRequest): QueryFault | undefined;
}

export class AwsQueryServer {
  /** Every request's form, in order. */
  readonly requests: Record<string, string>[] = [];
  /** Who signed each request, and for which region (SigV4's credential scope), in order. */
  readonly signatures: Omit<QueryRequest, "params">[] = [];
  private server?: Server;

  constructor(private readonly service: QueryService) {}

  /** Listens on a free loopback port; resolves with the endpoint URL. */
  async start(): Promise<string> {
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        const auth = req.headers.authorization ?? "";
        const scope = /Credential=([^/]+)\/\d+\/([^/]+)\//.exec(auth);
        const r: QueryRequest = {
          params: Object.fromEntries(new URLSearchParams(body)),
          accessKeyId: scope?.[1] ?? "",
          region: scope?.[2] ?? "",
        };
        this.requests.push(r.params);
        this.signatures.push({ accessKeyId: r.accessKeyId, region: r.region });
        res.setHeader("content-type", "text/xml");
        const fail = (f: QueryFault) => (
          (res.statusCode = f.status ?? 400),
          res.end(this.service.error(f.code, f.message))
        );
        if (!auth.startsWith("AWS4-HMAC-SHA256"))
          return fail({ ...this.service.unsigned, message: "unsigned request" });
        const refused = this.service.refuse?.(r);
        if (refused) return fail(refused);
        const { Action: action, Version: version } = r.params;
        const handler = this.service.handlers[`${version} ${action}`] ?? this.service.handlers[action];
        if (!handler) return fail({ code: "InvalidAction", message: `${action} (${version})` });
        try {
          res.end(handler(r));
        } catch (e) {
          fail(e as QueryFault);
        }
      });
    });
    this.server = server;
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  close(): void {
    this.server?.close();
  }
}
