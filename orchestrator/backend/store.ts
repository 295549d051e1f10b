// A small object store in the stack's own backend: what every runner sharing the backend
// sees. The rollout lease (orchestrator/lease/bucket.ts) lives here, and so can other records that
// must travel with the state (e.g. staging verification records). Writes are conditional
// so that two runners can never both believe they wrote the same version:
//  - putIfAbsent succeeds only if the key holds nothing (S3: If-None-Match: *);
//  - putIfMatch and delete succeed only if the key still holds the version read (S3: If-Match
//    with the ETag; Azure Blob: the same headers on Put/Delete Blob; a file backend: an
//    exclusively created next version).
// Keys are relative, "/"-separated paths ("molt/locks/prod.json"). S3's ETag is the content's
// MD5: a writer must never write the same bytes twice (the lease's records carry a run id and
// a timestamp), or a stale If-Match would still match.
// Every call has a deadline (STORE_CALL_MS, retries included, or less where the caller's
// signal says so): a store that stops answering fails the call with a BackendError instead of
// holding the run. An abandoned request may still land later (a frozen server processes what
// its socket buffered once it runs again): the lease's records say by when a write must land
// to count (orchestrator/lease/bucket.ts).
import type { ObjectStore } from "./object-store";
import { fileURLToPath } from "node:url";
import { BackendError } from "../stack/driver";
import { AzureBlobStore } from "./azblob";
import { FileStore } from "./file";
import { S3Store } from "./s3";
import { STORE_SCHEMES } from "./schemes";

export { STORE_SCHEMES };

/**
 * Backends whose objects molt can reach itself: a folder, an S3 (or S3-compatible) bucket, or an
 * Azure Blob container. gs:// and Pulumi Cloud have none (their leases cover one machine).
 */
export function openStore(backendUrl: string, env: Record<string, string | undefined> = {}): ObjectStore | undefined {
  if (backendUrl.startsWith("file://")) return new FileStore(fileURLToPath(backendUrl));
  if (backendUrl.startsWith("s3://")) return new S3Store(backendUrl, env);
  if (backendUrl.startsWith("azblob://")) return new AzureBlobStore(backendUrl, env);
  return undefined;
}

/** The store for a backend that must have one (a lease, a record): BackendError if it has none. */
export function requireStore(
  backendUrl: string,
  what: string,
  env: Record<string, string | undefined> = {},
): ObjectStore {
  const store = openStore(backendUrl, env);
  if (!store)
    throw new BackendError(
      redactUrl(backendUrl),
      `molt cannot keep ${what} in this backend (only ${STORE_SCHEMES} backends are supported for it)`,
    );
  return store;
}

/**
 * A backend URL as it names a cluster's owner (core/ownership.ts), kept in the cluster and shown
 * in messages: no user info (credentials), no query or fragment (tokens), no trailing slash.
 */
export function ownerBackend(url: string): string {
  return url
    .replace(/^([a-z0-9+.-]+:\/\/)[^@/]*@/i, "$1")
    .replace(/[?#].*$/s, "")
    .replace(/(?<=[^/:])\/+$/, "");
}

/** A backend URL without user info (a URL may carry credentials; messages never do). */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z0-9+.-]+:\/\/)[^@/]*@/i, "$1****@");
}
