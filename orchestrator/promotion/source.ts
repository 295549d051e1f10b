// Reading another stack's verification record from the backend it lives in: a read that never
// writes there (no .molt folder is made in the source's backend), and a message that names
// where the backend's URL came from (molt:promotion.requireVerifiedOn, --from-backend, or the
// stack's own backend) - not PULUMI_BACKEND_URL when the URL was not taken from it.
import { existsSync, readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { openStore, redactUrl, STORE_SCHEMES } from "../backend/store";
import { InvalidConfigError, loadStackConfig, stackConfigPath } from "../config";
import { BackendError } from "../stack/driver";
import { readRecord, UnreadableRecordError, type StoredRecord } from "./record";
import { resolvePromotion, type VerificationSource } from "./release";

/** The records of a stack cannot be read: the message says from where, whose URL it was, and what to check. */
export class RecordSourceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RecordSourceError";
  }
}

export interface RecordSource {
  url: string;
  /** Where the URL came from, for messages: "molt:promotion.requireVerifiedOn in stacks/Pulumi.prod.yaml". */
  origin: string;
}

/** The record of `release` on `stack` in `source`; undefined when there is none. */
export async function readSourceRecord(
  source: RecordSource,
  stack: string,
  release: string,
  env?: Record<string, string>,
): Promise<StoredRecord | undefined> {
  const where = redactUrl(source.url);
  const store = openStore(source.url, env);
  if (!store)
    throw new RecordSourceError(
      `molt reads verification records from ${STORE_SCHEMES} backends only, and ${where} (${source.origin}) is ` +
        `none of them: name the backend stack ${stack}'s records are in there`,
    );
  try {
    await store.check({ readOnly: true });
    return await readRecord(store, stack, release);
  } catch (e) {
    if (e instanceof UnreadableRecordError) throw e;
    const detail = e instanceof BackendError ? e.detail : (e as Error).message.split("\n")[0];
    throw new RecordSourceError(
      `the records of stack ${stack} cannot be read from ${where} (${source.origin}): ${detail}; ` +
        `check the URL there and that this runner may read that backend`,
    );
  }
}

/**
 * What stack `to`'s config says about reading `from`'s records (backend, public key), read
 * from molt:promotion alone: the rest of the file may be what a promotion is about to repair.
 * InvalidConfigError when molt:promotion itself is invalid; undefined when it names no such source.
 */
export function declaredSource(workDir: string, to: string, from: string): VerificationSource | undefined {
  const file = stackConfigPath(workDir, to);
  let raw: unknown;
  try {
    raw = (parseYaml(readFileSync(file, "utf8")) as { config?: unknown } | null)?.config;
  } catch {
    // Not YAML: the promotion's new text is validated as a whole before it is written.
    return undefined;
  }
  if (!raw || typeof raw !== "object") return undefined;
  const problems: string[] = [];
  const { promotion } = resolvePromotion(raw as Record<string, unknown>, to, problems);
  const own = problems.filter((p) => p.startsWith("molt:promotion"));
  if (own.length) throw new InvalidConfigError(file, own);
  return promotion.requireVerifiedOn.find((s) => s.stack === from);
}

/**
 * The soak stack `stack`'s own config asks for, when its config is in this project and
 * reads; undefined otherwise (then a record's own minutes are all there is to check).
 */
export function configuredSoakMinutes(workDir: string, stack: string): number | undefined {
  if (!existsSync(stackConfigPath(workDir, stack))) return undefined;
  try {
    return loadStackConfig(workDir, stack).promotion.soakMinutes;
  } catch {
    return undefined;
  }
}
