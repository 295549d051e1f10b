// The object store of an azblob:// backend: an Azure Blob container, reached exactly as the
// Pulumi engine's driver (gocloud.dev/blob/azureblob) reaches it, so that molt's records live
// in the same container as the state:
//  - azblob://<container>[/<prefix>] with the engine's parameters storage_account, domain,
//    protocol, cdn, localemu (and gocloud's generic prefix); anything else the engine refuses;
//  - defaults from AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL,
//    AZURE_STORAGE_IS_CDN, AZURE_STORAGE_IS_LOCAL_EMULATOR (and the connection string's
//    AccountName / DefaultEndpointsProtocol);
//  - credentials, first that applies: AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_KEY (shared key),
//    AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_CONNECTION_STRING (its own endpoint), else
//    DefaultAzureCredential (Entra ID: environment, workload or managed identity, Azure CLI).
// Conditional writes are the service's own: Put Blob with If-None-Match: * or If-Match: <ETag>,
// Delete Blob with If-Match (a 412 or 409 means another writer won). Azure's ETag changes on
// every write, whatever the bytes. Every call ends by its deadline (store.ts STORE_CALL_MS, or
// the caller's signal); each try within it by its own (TRY_MS).
// The SDK is loaded on first use only: other backends' commands never pay for loading it.
import type { ContainerClient, RestError, StoragePipelineOptions } from "@azure/storage-blob";
import { BackendError } from "../stack/driver";
import { withinDeadline, type CallOptions, type ObjectStore, type StoreClock, type StoredObject } from "./object-store";

type Env = Record<string, string | undefined>;

export type AzblobCredential = "shared-key" | "sas" | "connection-string" | "default";

/** Where an azblob:// URL points, as the engine's driver resolves it (never holds a credential). */
export interface AzblobLocation {
  container: string;
  /** Key prefix: gocloud's `prefix` parameter, then the URL's path (as the engine nests them). */
  prefix: string;
  /** The account's service URL (http(s)://<account>.<domain>, or <domain>/<account> for an emulator). */
  serviceUrl: string;
  account: string;
  credential: AzblobCredential;
}

/** Go's strconv.ParseBool, which the driver uses for cdn, localemu and their variables. */
const GO_BOOL = /^(1|t|T|TRUE|true|True|0|f|F|FALSE|false|False)$/;
const goTrue = (v: string) => /^(1|t|T|TRUE|true|True)$/.test(v);
/** Azure's container names: 3-63 lowercase letters, digits and single hyphens. */
const CONTAINER = /^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}$/;

/** The variables the engine's driver reads (empty counts as unset, as os.Getenv does). */
function envOf(env: Env): (k: string) => string | undefined {
  return (k) => (env[k] !== undefined ? env[k] : process.env[k]) || undefined;
}

function connectionStringField(cs: string, field: string): string | undefined {
  for (const part of cs.split(";")) {
    const kv = part.split("=");
    if (kv.length === 2 && kv[0] === field) return kv[1];
  }
  return undefined;
}

export function parseAzblobUrl(url: string, env: Env = {}): AzblobLocation {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new BackendError("an azblob URL", "it is not a URL");
  }
  // Messages show the container and path only: a query may carry a SAS signature.
  const shown = `azblob://${u.hostname}${u.pathname}`;
  if (u.protocol !== "azblob:" || !u.hostname)
    throw new BackendError(shown, "an Azure Blob backend URL reads azblob://<container>[/<prefix>]");
  if (u.username || u.password)
    throw new BackendError(
      shown,
      "an azblob URL carries no credentials (set AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or " +
        "AZURE_STORAGE_CONNECTION_STRING in the environment)",
    );
  if (!CONTAINER.test(u.hostname))
    throw new BackendError(
      shown,
      `${u.hostname} is not an Azure container name (3-63 lowercase letters, digits and single hyphens)`,
    );
  const get = envOf(env);
  const cs = get("AZURE_STORAGE_CONNECTION_STRING") ?? get("AZURE_STORAGEBLOB_CONNECTIONSTRING");
  let account = get("AZURE_STORAGE_ACCOUNT") ?? (cs && connectionStringField(cs, "AccountName"));
  let protocol = get("AZURE_STORAGE_PROTOCOL") ?? (cs && connectionStringField(cs, "DefaultEndpointsProtocol"));
  let domain = get("AZURE_STORAGE_DOMAIN");
  let cdn = goTrue(get("AZURE_STORAGE_IS_CDN") ?? "");
  let emulator = goTrue(get("AZURE_STORAGE_IS_LOCAL_EMULATOR") ?? "");
  let prefixParam = "";
  for (const k of new Set(u.searchParams.keys())) {
    const all = u.searchParams.getAll(k);
    if (all.length > 1) throw new BackendError(shown, `the URL parameter ${k} is given ${all.length} times`);
    const v = all[0];
    if (k === "storage_account") account = v;
    else if (k === "domain") domain = v;
    else if (k === "protocol") protocol = v;
    else if (k === "prefix") prefixParam = v;
    else if (k === "cdn" || k === "localemu") {
      if (!GO_BOOL.test(v)) throw new BackendError(shown, `${k}=${v}: write true or false`);
      if (k === "cdn") cdn = goTrue(v);
      else emulator = goTrue(v);
    } else
      throw new BackendError(
        shown,
        `the Pulumi engine refuses the URL parameter ${k} ` +
          "(an azblob URL reads storage_account, domain, protocol, cdn, localemu, prefix)",
      );
  }
  if (!account)
    throw new BackendError(
      shown,
      "no storage account is configured: set AZURE_STORAGE_ACCOUNT, add storage_account=<name> to the URL, " +
        "or set AZURE_STORAGE_CONNECTION_STRING",
    );
  protocol ||= "https";
  if (protocol !== "http" && protocol !== "https")
    throw new BackendError(shown, `protocol ${protocol}: write http or https`);
  domain ||= "blob.core.windows.net";
  let serviceUrl: string;
  if (domain.startsWith("127.0.0.1") || domain.startsWith("localhost") || emulator)
    serviceUrl = `${protocol}://${domain}/${account}`;
  else if (cdn) serviceUrl = `${protocol}://${domain}`;
  else serviceUrl = `${protocol}://${account}.${domain}`;
  try {
    new URL(serviceUrl);
  } catch {
    throw new BackendError(shown, `${serviceUrl} (from the account and domain) is not a URL`);
  }
  // The engine's order: shared key (from the variable, not storage_account), SAS, connection string.
  const credential: AzblobCredential =
    get("AZURE_STORAGE_ACCOUNT") && get("AZURE_STORAGE_KEY")
      ? "shared-key"
      : get("AZURE_STORAGE_SAS_TOKEN")
        ? "sas"
        : cs
          ? "connection-string"
          : "default";
  let path = u.pathname.replace(/^\/+/, "");
  if (path && !path.endsWith("/")) path += "/";
  return { container: u.hostname, prefix: prefixParam + decodeURIComponent(path), serviceUrl, account, credential };
}

/** One try of a call: a hung try is retried within the call's deadline. */
export const TRY_MS = 5000;

const NET = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|socket hang up|timed? ?out/i;

export class AzureBlobStore implements ObjectStore {
  readonly clockResolutionMs = 1000;
  readonly loc: AzblobLocation;
  private readonly env: Env;
  private client?: Promise<ContainerClient>;
  private clock?: StoreClock;

  /** `env`: the engine's environment where it is given (a library caller's), over process.env. */
  constructor(
    readonly url: string,
    env: Env = {},
  ) {
    this.env = env;
    this.loc = parseAzblobUrl(url, env);
  }

  get location(): string {
    return `azblob://${this.loc.container}/${this.loc.prefix} at ${this.endpoint()}`;
  }

  lastClock(): StoreClock | undefined {
    return this.clock;
  }

  async check(o?: CallOptions): Promise<void> {
    await this.properties(o);
  }

  async get(key: string, o?: CallOptions): Promise<StoredObject | undefined> {
    return this.call(o, async (abortSignal) => {
      const blob = (await this.container()).getBlobClient(this.key(key));
      try {
        const r = await this.timed(() => blob.download(0, undefined, { abortSignal }));
        const chunks: Buffer[] = [];
        for await (const c of r.readableStreamBody!) chunks.push(Buffer.from(c as Buffer));
        return { body: Buffer.concat(chunks), etag: r.etag!, modified: r.lastModified! };
      } catch (e) {
        if (isRest(e) && e.statusCode === 404 && errorCode(e) !== "ContainerNotFound") return undefined;
        throw this.backendError(e);
      }
    });
  }

  async putIfAbsent(key: string, body: Buffer, o?: CallOptions): Promise<string | undefined> {
    return this.put(key, body, { ifNoneMatch: "*" }, o);
  }

  async putIfMatch(key: string, body: Buffer, etag: string, o?: CallOptions): Promise<string | undefined> {
    return this.put(key, body, { ifMatch: etag }, o);
  }

  async delete(key: string, etag: string, o?: CallOptions): Promise<boolean> {
    return this.call(o, async (abortSignal) => {
      const blob = (await this.container()).getBlobClient(this.key(key));
      try {
        await this.timed(() => blob.delete({ conditions: { ifMatch: etag }, abortSignal }));
        return true;
      } catch (e) {
        if (isRest(e) && (e.statusCode === 412 || (e.statusCode === 404 && !containerGone(e)))) return false;
        throw this.backendError(e);
      }
    });
  }

  async list(prefix: string, o?: CallOptions): Promise<string[]> {
    return this.call(o, async (abortSignal) => {
      const keys: string[] = [];
      try {
        for await (const b of (await this.container()).listBlobsFlat({ prefix: this.key(prefix), abortSignal }))
          keys.push(b.name.slice(this.loc.prefix.length));
      } catch (e) {
        throw this.backendError(e);
      }
      return keys;
    });
  }

  async now(o?: CallOptions): Promise<Date> {
    const date = (await this.properties(o)).date;
    if (!date || Number.isNaN(date.getTime()))
      throw new Error(`${this.location} sent no Date header: molt cannot tell whether a lease there expired`);
    return date;
  }

  private async properties(o?: CallOptions) {
    return this.call(o, async (abortSignal) => {
      try {
        return await this.timed(async () => (await this.container()).getProperties({ abortSignal }));
      } catch (e) {
        throw this.backendError(e);
      }
    });
  }

  private async put(
    key: string,
    body: Buffer,
    conditions: { ifNoneMatch?: string; ifMatch?: string },
    o?: CallOptions,
  ) {
    return this.call(o, async (abortSignal) => {
      const blob = (await this.container()).getBlockBlobClient(this.key(key));
      try {
        const r = await this.timed(() =>
          blob.upload(body, body.length, {
            conditions,
            blobHTTPHeaders: { blobContentType: "application/json" },
            abortSignal,
          }),
        );
        return r.etag!;
      } catch (e) {
        // 412 ConditionNotMet; 409 BlobAlreadyExists (If-None-Match: * lost); 404: If-Match on nothing.
        if (isRest(e) && !containerGone(e))
          if (e.statusCode === 412 || e.statusCode === 409 || (conditions.ifMatch && e.statusCode === 404))
            return undefined;
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
          this.shown(),
          `${this.endpoint()} did not answer within ${ms / 1000} s (the service is stopped, overloaded or ` +
            "unreachable); check the account, domain and the network",
        ),
      run,
    );
  }

  /** A request, reading the service's clock from its answer (an error's too), with how long it took. */
  private async timed<T extends { date?: Date }>(request: () => Promise<T>): Promise<T> {
    const sent = performance.now();
    const read = (date: number | undefined) => {
      const at = performance.now();
      if (date !== undefined && !Number.isNaN(date)) this.clock = { date, at, rttMs: at - sent };
    };
    try {
      const r = await request();
      read(r.date?.getTime());
      return r;
    } catch (e) {
      const h = isRest(e) ? e.response?.headers.get("date") : undefined;
      if (h) read(Date.parse(h));
      throw e;
    }
  }

  private key(key: string): string {
    return this.loc.prefix + key;
  }

  /** The container's client, made once, with the credential the engine's driver would use. */
  private container(): Promise<ContainerClient> {
    this.client ??= this.makeClient();
    return this.client;
  }

  private async makeClient(): Promise<ContainerClient> {
    const { AnonymousCredential, ContainerClient, StorageSharedKeyCredential } =
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use (CommonJS build)
      require("@azure/storage-blob") as typeof import("@azure/storage-blob");
    const get = envOf(this.env);
    const options: StoragePipelineOptions = {
      retryOptions: { maxTries: 3, retryDelayInMs: 200, maxRetryDelayInMs: 1000, tryTimeoutInMs: TRY_MS },
    };
    const containerUrl = `${this.loc.serviceUrl}/${this.loc.container}`;
    switch (this.loc.credential) {
      case "shared-key":
        try {
          return new ContainerClient(
            containerUrl,
            new StorageSharedKeyCredential(get("AZURE_STORAGE_ACCOUNT")!, get("AZURE_STORAGE_KEY")!),
            options,
          );
        } catch {
          throw new BackendError(this.shown(), "AZURE_STORAGE_KEY is not a storage account key (base64)");
        }
      case "sas": {
        const sas = get("AZURE_STORAGE_SAS_TOKEN")!.replace(/^\?/, "");
        return new ContainerClient(`${this.loc.serviceUrl}/${this.loc.container}?${sas}`, new AnonymousCredential(), {
          ...options,
        });
      }
      case "connection-string":
        try {
          const cs = get("AZURE_STORAGE_CONNECTION_STRING") ?? get("AZURE_STORAGEBLOB_CONNECTIONSTRING")!;
          return new ContainerClient(cs, this.loc.container, options);
        } catch (e) {
          // The SDK's message may quote the string: name only what is wrong.
          throw new BackendError(
            this.shown(),
            `AZURE_STORAGE_CONNECTION_STRING cannot be used (${/Invalid\s[\w ]+|[\w ]+ not found/i.exec((e as Error).message)?.[0] ?? "malformed"})`,
          );
        }
      case "default": {
        // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only for Entra ID
        const { DefaultAzureCredential } = require("@azure/identity") as typeof import("@azure/identity");
        return new ContainerClient(containerUrl, new DefaultAzureCredential(), options);
      }
    }
  }

  private shown(): string {
    return `azblob://${this.loc.container}/${this.loc.prefix}`;
  }

  /** The service endpoint, never with a SAS token. */
  private endpoint(): string {
    return this.loc.credential === "connection-string" ? "the connection string's endpoint" : this.loc.serviceUrl;
  }

  /** An error of the store as a BackendError that says what is wrong and what to do. */
  private backendError(e: unknown): Error {
    if (e instanceof BackendError) return e;
    const err = e as RestError & { code?: string };
    const st = isRest(err) ? err.statusCode : undefined;
    const code = isRest(err) ? errorCode(err) : undefined;
    const where = `azblob://${this.loc.container} at ${this.endpoint()}`;
    const net = NET.exec(`${err.code ?? ""} ${err.name} ${err.message}`)?.[0];
    let detail: string;
    if (st === 404 && containerGone(err))
      detail =
        `the container ${this.loc.container} does not exist in the account ${this.loc.account} ` +
        "(molt never creates one: create it, or fix the URL)";
    else if (st === 403 || st === 401)
      detail =
        `${where} refused the credentials (${code ?? `HTTP ${st}`}): check ${credentialHint(this.loc.credential)}, ` +
        "and that they may read and write blobs in the container";
    else if (/CredentialUnavailable|AuthenticationRequired|DefaultAzureCredential/i.test(`${err.name} ${err.message}`))
      detail =
        "no Azure credentials were found: set AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN " +
        "or AZURE_STORAGE_CONNECTION_STRING, or sign in for DefaultAzureCredential (e.g. az login)";
    else if (net && !st) detail = `cannot reach ${this.endpoint()} (${net}); check the account, domain and the network`;
    else
      return new Error(
        `${where}: ${code ?? err.name ?? "error"}: ${redactSas(err.message.split("\n")[0])} (HTTP ${st ?? "none"})`,
      );
    return new BackendError(this.shown(), detail);
  }
}

/** The SDK's RestError (told by shape: the SDK is not loaded at import time). */
function isRest(e: unknown): e is RestError {
  return e instanceof Error && e.name === "RestError";
}

function errorCode(e: RestError): string | undefined {
  const h = e.response?.headers.get("x-ms-error-code");
  return h ?? (e.code && e.code !== "REQUEST_SEND_ERROR" ? e.code : undefined);
}

function containerGone(e: RestError): boolean {
  return e.statusCode === 404 && errorCode(e) === "ContainerNotFound";
}

function credentialHint(c: AzblobCredential): string {
  switch (c) {
    case "shared-key":
      return "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY";
    case "sas":
      return "AZURE_STORAGE_SAS_TOKEN (its permissions and expiry)";
    case "connection-string":
      return "AZURE_STORAGE_CONNECTION_STRING";
    case "default":
      return "the identity DefaultAzureCredential signed in with (its role on the account)";
  }
}

/** A SAS signature quoted by a service message is never repeated. */
function redactSas(s: string): string {
  return s.replace(/([?&]sig=)[^&\s]+/gi, "$1****");
}
