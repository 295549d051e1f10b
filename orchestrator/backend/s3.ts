// The object store of an s3:// backend: AWS S3 or an S3-compatible server, reached with the
// same URL the Pulumi engine reads (s3://bucket[/prefix]?region=..&endpoint=..&use_path_style=true)
// and the AWS SDK's default credential chain (environment, profile, web identity, instance
// role). Conditional writes are S3's own: PutObject with If-None-Match: * or If-Match: <ETag>,
// DeleteObject with If-Match (a 412 means another writer won). Every call ends by its deadline
// (store.ts STORE_CALL_MS, or the caller's signal); each HTTP attempt within it by its own.
import type { S3Client, S3ClientConfig } from "@aws-sdk/client-s3";
import { s3Sdk } from "../edges/aws-sdks";
import { BackendError } from "../stack/driver";
import { withinDeadline, type CallOptions, type ObjectStore, type StoreClock, type StoredObject } from "./object-store";

/** The URL parameters the engine's S3 driver reads (gocloud.dev/blob/s3blob) that matter here. */
export interface S3Location {
  bucket: string;
  prefix: string;
  region?: string;
  endpoint?: string;
  pathStyle: boolean;
  profile?: string;
}

const BOOL = /^(1|t|true|0|f|false)$/i;
const truthy = (v: string) => /^(1|t|true)$/i.test(v);
/** Parameters the engine accepts that change nothing for molt's own requests. */
const IGNORED = new Set([
  "awssdk",
  "request_checksum_calculation",
  "response_checksum_validation",
  "rate_limiter_capacity",
  "dualstack",
  "fips",
  "hostname_immutable",
  "kmskeyid",
  "ssetype",
  "accelerate",
]);

export function parseS3Url(url: string): S3Location {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new BackendError(url, "it is not a URL");
  }
  if (u.protocol !== "s3:" || !u.hostname)
    throw new BackendError(url, "an s3 backend URL reads s3://<bucket>[/<prefix>]");
  if (u.username || u.password) throw new BackendError(redacted(u), "an s3 URL carries no credentials");
  const loc: S3Location = { bucket: u.hostname, prefix: u.pathname.replace(/^\/+/, ""), pathStyle: false };
  if (loc.prefix && !loc.prefix.endsWith("/")) loc.prefix += "/";
  let disableHttps = false;
  for (const [k, v] of u.searchParams) {
    if (k === "region") loc.region = v;
    else if (k === "endpoint") loc.endpoint = v;
    else if (k === "profile") loc.profile = v;
    else if (k === "use_path_style" || k === "s3ForcePathStyle" || k === "disable_https" || k === "disableSSL") {
      if (!BOOL.test(v)) throw new BackendError(url, `${k}=${v}: write true or false`);
      if (k === "disable_https" || k === "disableSSL") disableHttps = truthy(v);
      else loc.pathStyle = truthy(v);
    } else if (!IGNORED.has(k))
      throw new BackendError(
        url,
        `molt's lock store does not support the URL parameter ${k} ` +
          "(it reads region, endpoint, profile, use_path_style)",
      );
  }
  if (loc.endpoint && !loc.endpoint.includes("://"))
    loc.endpoint = `${disableHttps ? "http" : "https"}://${loc.endpoint}`;
  if (loc.endpoint) {
    try {
      new URL(loc.endpoint);
    } catch {
      throw new BackendError(url, `endpoint=${loc.endpoint} is not a URL`);
    }
  }
  return loc;
}

function redacted(u: URL): string {
  const c = new URL(u.href);
  c.username = c.password = "";
  return c.href;
}

interface AwsError extends Error {
  Code?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

const status = (e: unknown) => (e as AwsError).$metadata?.httpStatusCode;

/**
 * One HTTP attempt: connected within CONNECT_MS and answered within ATTEMPT_MS (the SDK only
 * warns about a late answer unless told to throw), so a hung attempt is retried within the call's deadline.
 */
export const CONNECT_MS = 3000;
export const ATTEMPT_MS = 5000;

export class S3Store implements ObjectStore {
  readonly clockResolutionMs = 1000;
  readonly loc: S3Location;
  private readonly sdk = s3Sdk();
  private readonly client: S3Client;
  /** The server's clock, from the Date header of the last response. */
  private clock?: StoreClock;

  /**
   * `env`: where to read AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) from when
   * they are given there (a library caller's environment for the engine); else the SDK's default chain.
   */
  constructor(
    readonly url: string,
    env: Record<string, string | undefined> = {},
  ) {
    this.loc = parseS3Url(url);
    const keys =
      env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
        ? {
            credentials: {
              accessKeyId: env.AWS_ACCESS_KEY_ID,
              secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
              ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
            },
          }
        : {};
    const config: S3ClientConfig = {
      ...keys,
      region:
        this.loc.region ?? env.AWS_REGION ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? "us-east-1",
      forcePathStyle: this.loc.pathStyle,
      maxAttempts: 3,
      requestHandler: { connectionTimeout: CONNECT_MS, requestTimeout: ATTEMPT_MS, throwOnRequestTimeout: true },
      ...(this.loc.profile || env.AWS_PROFILE ? { profile: this.loc.profile ?? env.AWS_PROFILE } : {}),
      ...(this.loc.endpoint
        ? {
            endpoint: this.loc.endpoint,
            // As the engine does for a custom endpoint: checksums only where S3 requires them.
            requestChecksumCalculation: "WHEN_REQUIRED" as const,
            responseChecksumValidation: "WHEN_REQUIRED" as const,
          }
        : {}),
    };
    this.client = new this.sdk.S3Client(config);
    // Each attempt's Date header, with how long the attempt took (errors carry one too).
    this.client.middlewareStack.add(
      (next) => async (args) => {
        const sent = performance.now();
        const read = (response: unknown) => {
          const date = Date.parse((response as { headers?: Record<string, string> } | undefined)?.headers?.date ?? "");
          const at = performance.now();
          if (!Number.isNaN(date)) this.clock = { date, at, rttMs: at - sent };
        };
        try {
          const out = await next(args);
          read(out.response);
          return out;
        } catch (e) {
          read((e as { $response?: unknown }).$response);
          throw e;
        }
      },
      { step: "deserialize", name: "moltServerDate" },
    );
  }

  get location(): string {
    return `s3://${this.loc.bucket}/${this.loc.prefix}${this.loc.endpoint ? ` at ${this.loc.endpoint}` : ""}`;
  }

  lastClock(): StoreClock | undefined {
    return this.clock;
  }

  async check(o?: CallOptions): Promise<void> {
    await this.call(o, (abortSignal) =>
      this.client
        .send(new this.sdk.HeadBucketCommand({ Bucket: this.loc.bucket }), { abortSignal })
        .catch((e: unknown) => {
          throw this.backendError(e);
        }),
    );
  }

  async get(key: string, o?: CallOptions): Promise<StoredObject | undefined> {
    return this.call(o, async (abortSignal) => {
      try {
        const r = await this.client.send(
          new this.sdk.GetObjectCommand({ Bucket: this.loc.bucket, Key: this.key(key) }),
          {
            abortSignal,
          },
        );
        const body = Buffer.from(await r.Body!.transformToByteArray());
        return { body, etag: r.ETag!, modified: r.LastModified! };
      } catch (e) {
        if (status(e) === 404) return undefined;
        throw this.backendError(e);
      }
    });
  }

  async putIfAbsent(key: string, body: Buffer, o?: CallOptions): Promise<string | undefined> {
    return this.put(key, body, { IfNoneMatch: "*" }, o);
  }

  async putIfMatch(key: string, body: Buffer, etag: string, o?: CallOptions): Promise<string | undefined> {
    return this.put(key, body, { IfMatch: etag }, o);
  }

  async delete(key: string, etag: string, o?: CallOptions): Promise<boolean> {
    return this.call(o, async (abortSignal) => {
      try {
        await this.client.send(
          new this.sdk.DeleteObjectCommand({ Bucket: this.loc.bucket, Key: this.key(key), IfMatch: etag }),
          { abortSignal },
        );
        return true;
      } catch (e) {
        if (status(e) === 412 || status(e) === 404) return false;
        throw this.backendError(e);
      }
    });
  }

  async list(prefix: string, o?: CallOptions): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      // A deadline per page.
      const r = await this.call(o, (abortSignal) =>
        this.client
          .send(
            new this.sdk.ListObjectsV2Command({
              Bucket: this.loc.bucket,
              Prefix: this.key(prefix),
              ...(token ? { ContinuationToken: token } : {}),
            }),
            { abortSignal },
          )
          .catch((e: unknown) => {
            throw this.backendError(e);
          }),
      );
      for (const c of r.Contents ?? []) if (c.Key) keys.push(c.Key.slice(this.loc.prefix.length));
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  async now(o?: CallOptions): Promise<Date> {
    const asked = performance.now();
    await this.check(o);
    const c = this.lastClock();
    if (!c || c.at < asked)
      throw new Error(`${this.location} sent no Date header: molt cannot tell whether a lease there expired`);
    return new Date(c.date);
  }

  private async put(key: string, body: Buffer, cond: { IfNoneMatch?: string; IfMatch?: string }, o?: CallOptions) {
    return this.call(o, async (abortSignal) => {
      try {
        const r = await this.client.send(
          new this.sdk.PutObjectCommand({
            Bucket: this.loc.bucket,
            Key: this.key(key),
            Body: body,
            ContentType: "application/json",
            ...cond,
          }),
          { abortSignal },
        );
        return r.ETag!;
      } catch (e) {
        // 412: the condition failed; 409: a concurrent conditional write won; 404: If-Match on nothing.
        if (status(e) === 412 || status(e) === 409 || (cond.IfMatch && status(e) === 404)) return undefined;
        throw this.backendError(e);
      }
    });
  }

  /** One call within its deadline (store.ts withinDeadline). */
  private call<T>(o: CallOptions | undefined, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return withinDeadline(
      o,
      (ms) =>
        new BackendError(
          this.url,
          `${this.loc.endpoint ?? "S3"} did not answer within ${ms / 1000} s (the server is stopped, overloaded or ` +
            "unreachable); check the endpoint and the network",
        ),
      run,
    );
  }

  private key(key: string): string {
    return this.loc.prefix + key;
  }

  /** An error of the store as a BackendError that says what is wrong and what to do. */
  private backendError(e: unknown): Error {
    const err = e as AwsError;
    // A HEAD answer has no body: the SDK names its error "Unknown", "NotFound" or "Forbidden".
    const named = err.Code ?? err.name ?? err.code;
    const code = !named || named === "Unknown" ? `HTTP ${status(e) ?? "error"}` : named;
    const where = `s3://${this.loc.bucket}${this.loc.endpoint ? ` at ${this.loc.endpoint}` : ""}`;
    const net =
      (err as NodeJS.ErrnoException).code ??
      /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|socket hang up|TimeoutError/.exec(
        `${err.name} ${err.message}`,
      )?.[0];
    let detail: string;
    if (status(e) === 404 && /NoSuchBucket|NotFound/.test(String(code)))
      detail = `the bucket ${this.loc.bucket} does not exist (molt never creates one: create it, or fix the URL)`;
    else if (status(e) === 403 || /InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|Forbidden/.test(String(code)))
      detail =
        `${where} refused the credentials (${code}): ` +
        "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), " +
        `and that they may read and write the bucket`;
    else if (/CredentialsProviderError/.test(String(code)) || /Could not load credentials/i.test(err.message))
      detail = "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE";
    else if (net && !status(e))
      detail = `cannot reach ${this.loc.endpoint ?? "S3"} (${net}); check the endpoint and the network`;
    else return new Error(`${where}: ${code ?? "error"}: ${err.message} (HTTP ${status(e) ?? "none"})`);
    return new BackendError(this.url, detail);
  }
}
