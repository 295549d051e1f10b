// The object store of a file:// backend (a folder, possibly shared by several machines).
// A record is a folder of numbered versions, `<key>.versions/0000000007`; the highest number
// is the current version and an empty file marks a deletion. A write creates the next number
// with link(2), which fails if that name exists: of two writers of the same next version
// exactly one wins, on a local file system and on NFS alike (the same exclusive-create the
// earlier lock file relied on). Older versions are removed after each write. Calls are
// synchronous file system calls: a caller's signal is checked before each, none is cut short.
import { randomBytes } from "node:crypto";
import {
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeFileSync,
  type Stats,
} from "node:fs";
import { join, relative, sep } from "node:path";
import { BackendError } from "../stack/driver";
import {
  CallAbandonedError,
  type CallOptions,
  type CheckOptions,
  type ObjectStore,
  type StoreClock,
  type StoredObject,
} from "./object-store";

const SUFFIX = ".versions";
const VERSION = /^\d{10}$/;

export class FileStore implements ObjectStore {
  readonly clockResolutionMs = 1;
  private clock?: StoreClock;
  constructor(readonly root: string) {}

  get location(): string {
    return this.root;
  }

  lastClock(): StoreClock | undefined {
    return this.clock;
  }

  async check(o?: CheckOptions): Promise<void> {
    live(o);
    // The backend's folder is never created here: a mistyped PULUMI_BACKEND_URL would
    // otherwise become a new, empty backend (and a rollout would create a new cluster).
    if (!existsSync(this.root)) throw new BackendError(`file://${this.root}`, `the folder ${this.root} does not exist`);
    if (o?.readOnly) {
      try {
        if (!statSync(this.root).isDirectory()) throw Object.assign(new Error(), { code: "ENOTDIR" });
        readdirSync(this.root);
      } catch (e) {
        throw new BackendError(`file://${this.root}`, `cannot read the folder ${this.root} (${errCode(e)})`);
      }
      return;
    }
    const dir = join(this.root, ".molt");
    try {
      mkdirSync(dir, { recursive: true });
    } catch (e) {
      throw new BackendError(`file://${this.root}`, `cannot create ${dir} (${errCode(e)})`);
    }
  }

  async get(key: string, o?: CallOptions): Promise<StoredObject | undefined> {
    live(o);
    const path = this.path(key);
    let st: Stats;
    try {
      st = statSync(path);
    } catch {
      st = undefined as unknown as Stats;
    }
    // A plain file (written by the engine, e.g. its lock): its content and mtime are its version.
    if (st?.isFile()) {
      const body = readFileSync(path);
      return { body, etag: `f${st.mtimeMs}:${st.size}`, modified: st.mtime };
    }
    // A version removed by a concurrent writer's clean-up between listing and reading: list again.
    for (let attempt = 0; attempt < 8; attempt++) {
      const cur = this.current(path + SUFFIX);
      if (!cur) return undefined;
      try {
        const file = join(path + SUFFIX, cur);
        const v = statSync(file);
        if (v.size === 0) return undefined;
        return { body: readFileSync(file), etag: `v${cur}`, modified: v.mtime };
      } catch (e) {
        if (errCode(e) !== "ENOENT") throw e;
      }
    }
    throw new Error(`${path}${SUFFIX} kept changing while it was read`);
  }

  async putIfAbsent(key: string, body: Buffer, o?: CallOptions): Promise<string | undefined> {
    live(o);
    const dir = this.path(key) + SUFFIX;
    mkdirSync(dir, { recursive: true });
    const cur = this.current(dir);
    if (cur && statSync(join(dir, cur)).size > 0) return undefined;
    return this.create(dir, next(cur), body);
  }

  async putIfMatch(key: string, body: Buffer, etag: string, o?: CallOptions): Promise<string | undefined> {
    live(o);
    const dir = this.path(key) + SUFFIX;
    const cur = existsSync(dir) ? this.current(dir) : undefined;
    if (!cur || etag !== `v${cur}` || statSync(join(dir, cur)).size === 0) return undefined;
    return this.create(dir, next(cur), body);
  }

  async delete(key: string, etag: string, o?: CallOptions): Promise<boolean> {
    live(o);
    const path = this.path(key);
    if (etag.startsWith("f")) {
      // A plain file: removed if unchanged since it was read.
      const cur = await this.get(key);
      if (!cur || cur.etag !== etag) return false;
      unlinkSync(path);
      return true;
    }
    const dir = path + SUFFIX;
    const cur = existsSync(dir) ? this.current(dir) : undefined;
    if (!cur || etag !== `v${cur}`) return false;
    return this.create(dir, next(cur), Buffer.alloc(0)) !== undefined;
  }

  async list(prefix: string, o?: CallOptions): Promise<string[]> {
    live(o);
    const base = prefix.replace(/\/+$/, "") === "" ? this.root : this.path(prefix.replace(/\/+$/, ""));
    const keys: string[] = [];
    const walk = (dir: string): void => {
      let entries;
      try {
        entries = readdirSync(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of entries) {
        const p = join(dir, e.name);
        if (e.isDirectory() && e.name.endsWith(SUFFIX)) {
          const cur = this.current(p);
          if (cur && statSync(join(p, cur)).size > 0) keys.push(this.key(p.slice(0, -SUFFIX.length)));
        } else if (e.isDirectory()) walk(p);
        else if (e.isFile() && !e.name.startsWith(".tmp-")) keys.push(this.key(p));
      }
    };
    walk(base);
    return keys;
  }

  async now(o?: CallOptions): Promise<Date> {
    live(o);
    // The file system's clock: the mtime of a file written now (a shared folder's server may
    // stamp it, and every `modified` is read from the same clock).
    const probe = join(this.root, ".molt", `.tmp-clock-${randomBytes(6).toString("hex")}`);
    mkdirSync(join(this.root, ".molt"), { recursive: true });
    const sent = performance.now();
    writeFileSync(probe, "");
    try {
      return this.read(statSync(probe), sent);
    } finally {
      unlinkSync(probe);
    }
  }

  /** A file's mtime as a reading of the file system's clock (stamped between `sent` and now). */
  private read(st: Stats, sent: number): Date {
    const at = performance.now();
    this.clock = { date: st.mtimeMs, at, rttMs: at - sent };
    return st.mtime;
  }

  private path(key: string): string {
    if (key.split("/").some((p) => p === ".." || p === "")) throw new Error(`invalid store key ${key}`);
    return join(this.root, ...key.split("/"));
  }

  private key(path: string): string {
    return relative(this.root, path).split(sep).join("/");
  }

  /** The highest version in a record's folder. */
  private current(dir: string): string | undefined {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (e) {
      if (errCode(e) === "ENOENT") return undefined;
      throw e;
    }
    return names
      .filter((n) => VERSION.test(n))
      .sort()
      .pop();
  }

  /** Creates version `name` exclusively (with its whole content), then removes older ones. */
  private create(dir: string, name: string, body: Buffer): string | undefined {
    const tmp = join(dir, `.tmp-${randomBytes(8).toString("hex")}`);
    const sent = performance.now();
    writeFileSync(tmp, body);
    this.read(statSync(tmp), sent); // the version's mtime: the same inode
    try {
      linkSync(tmp, join(dir, name));
    } catch (e) {
      if (errCode(e) === "EEXIST") return undefined;
      throw e;
    } finally {
      unlinkSync(tmp);
    }
    // A slow writer can recreate a number that a newer write already cleaned up: a write is
    // only a write if nothing newer exists.
    if (this.current(dir) !== name) {
      rmQuiet(join(dir, name));
      return undefined;
    }
    for (const n of readdirSync(dir)) {
      if (VERSION.test(n) && n < name) rmQuiet(join(dir, n));
      // A writer killed between its write and its link leaves a temporary file: gone after a minute.
      if (n.startsWith(".tmp-")) {
        try {
          if (Date.now() - statSync(join(dir, n)).mtimeMs > 60_000) rmQuiet(join(dir, n));
        } catch {
          /* removed meanwhile */
        }
      }
    }
    return `v${name}`;
  }
}

/** A call whose caller already gave up is not made. */
function live(o: CallOptions | undefined): void {
  if (o?.signal?.aborted) throw new CallAbandonedError(o.signal.reason);
}

function next(cur: string | undefined): string {
  return String((cur ? Number(cur) : 0) + 1).padStart(10, "0");
}

function rmQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    /* another writer's clean-up removed it first */
  }
}

function errCode(e: unknown): string {
  return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
}
