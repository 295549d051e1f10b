// The backends whose objects molt reaches itself (orchestrator/backend/store.ts opens them):
// one list for the config schema, the store and every message that names them.

/** For messages: "file://, s3:// and azblob://". */
export const STORE_SCHEMES = "file://, s3:// and azblob://";

/** A backend URL openStore can open. */
export const STORE_URL = /^(file|s3|azblob):\/\/./;
