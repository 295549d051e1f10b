// What molt keeps beside a stack in its backend (leases, records, sidecar files), whatever the
// backend: the interface the file, S3 and Azure blob stores implement.

export interface StoredObject {
  body: Buffer;
  /** Opaque version: pass it to putIfMatch/delete. */
  etag: string;
  /** When this version was written, by the store's clock. */
  modified: Date;
}

export interface ObjectStore {
  /** Where the objects live, for messages (never holds a credential). */
  readonly location: string;
  /** Fails with BackendError (exit 2) when the store cannot be used: no bucket, refused credentials, unreachable. */
  check(): Promise<void>;
  get(key: string): Promise<StoredObject | undefined>;
  /** The new version's etag, or undefined when the key already holds something. */
  putIfAbsent(key: string, body: Buffer): Promise<string | undefined>;
  /** The new version's etag, or undefined when the key no longer holds version `etag`. */
  putIfMatch(key: string, body: Buffer, etag: string): Promise<string | undefined>;
  /** True when version `etag` was deleted; false when the key holds another version or nothing. */
  delete(key: string, etag: string): Promise<boolean>;
  /** Keys under a prefix ("" for all), in no particular order. */
  list(prefix: string): Promise<string[]>;
  /** The store's clock now (the clock `modified` is read from), so expiry never compares two machines' clocks. */
  now(): Promise<Date>;
  /** Resolution of `modified` and `now()` in ms (S3's HTTP dates: whole seconds). */
  readonly clockResolutionMs: number;
}
