// Signed verification records: the environment that soaks a release signs its record with an
// ed25519 private key that the backend never holds (a file or an environment variable of that
// environment's CI), and the stacks that rely on the record name the public key they trust
// (molt:promotion.requireVerifiedOn[].publicKey). Write access to the backend is then not
// enough to make a record another stack accepts.
//
// Keys are read as openssl writes them (`openssl genpkey -algorithm ed25519`: PKCS#8 PEM;
// `openssl pkey -pubout`: SPKI PEM), as DER, or as the base64 of the DER on one line (what
// `molt keygen` prints for the config). Messages name where a key came from, never its content.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { rememberSecret } from "../report/redact";
import { PromotionRefusedError } from "./errors";

/** The path of the private key file, in the signing environment. */
export const SIGNING_KEY_FILE_ENV = "MOLT_SIGNING_KEY_FILE";
/** The private key itself (PEM, or base64 DER), for CI systems that hand secrets over as variables. */
export const SIGNING_KEY_ENV = "MOLT_SIGNING_KEY";

const MAKE_ONE =
  "make a key pair with `molt keygen --out <file>` (or `openssl genpkey -algorithm ed25519 -out <file>`)";

/** A signing key that cannot be used: bad input, nothing was changed (exit 2). */
export class SigningKeyError extends PromotionRefusedError {
  constructor(message: string) {
    super(`${message}; nothing was changed`);
    this.name = "SigningKeyError";
  }
}

/** Signs with the private key it was made from; never exposes it. */
export interface RecordSigner {
  /** SHA256:<base64> of the public key (its DER), as records and messages name keys. */
  readonly keyId: string;
  /** The public key, base64 of its DER: what a requiring stack writes as publicKey. */
  readonly publicKey: string;
  /** The base64 ed25519 signature of `data`. */
  sign(data: Buffer): string;
}

/** A public key as config carries it: parsed, with its one-line form and its id. */
export interface TrustedKey {
  key: KeyObject;
  /** base64 of the SPKI DER, one line. */
  base64: string;
  keyId: string;
}

export function keyIdOf(spkiDer: Buffer): string {
  return "SHA256:" + createHash("sha256").update(spkiDer).digest("base64").replace(/=+$/, "");
}

const pemLabel = (text: string) => /-----BEGIN ([A-Z0-9 ]+)-----/.exec(text)?.[1];
const BASE64 = /^[A-Za-z0-9+/\s]+=*\s*$/;

function attempt<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}

function mustBeEd25519(key: KeyObject, where: string, what: string): void {
  if (key.asymmetricKeyType !== "ed25519")
    throw new Error(
      `${where} is ${key.asymmetricKeyType ? `an ${key.asymmetricKeyType}` : "another kind of"} ${what}; ` +
        `molt signs records with ed25519 only: ${MAKE_ONE}`,
    );
}

/** The private key in `data` (read from `where`); a message saying what is wrong otherwise. */
export function parsePrivateKey(data: Buffer, where: string): KeyObject {
  const text = data.toString("utf8").trim();
  // Whatever it turns out to be, it was meant as a private key: never reported from now on.
  rememberSecret(text);
  if (!text) throw new Error(`${where} is empty: ${MAKE_ONE}`);
  const label = pemLabel(text);
  const isPublic = () =>
    new Error(
      `${where} holds a public key, where the private key is needed: the signing environment keeps the ` +
        `private key; the public key goes into the requiring stack's molt:promotion.requireVerifiedOn[].publicKey`,
    );
  let key: KeyObject | undefined;
  if (label !== undefined) {
    if (/PUBLIC KEY/.test(label)) throw isPublic();
    if (label === "ENCRYPTED PRIVATE KEY")
      throw new Error(
        `${where} is encrypted with a passphrase, which molt does not take: keep the key unencrypted in the CI ` +
          `system's secret store (openssl pkey -in <file> -out <new file>)`,
      );
    if (label === "OPENSSH PRIVATE KEY")
      throw new Error(`${where} is an OpenSSH key, which node:crypto cannot read: ${MAKE_ONE}`);
    if (!/PRIVATE KEY$/.test(label)) throw new Error(`${where} is a PEM "${label}", not a private key: ${MAKE_ONE}`);
    key = attempt(() => createPrivateKey({ key: text, format: "pem" }));
    if (!key) throw new Error(`${where} holds a "${label}" block that cannot be read as a key: ${MAKE_ONE}`);
  } else {
    if (/^ssh-/.test(text)) throw isPublic();
    // DER as it is, or its base64 on one line.
    const ders = [data, ...(BASE64.test(text) ? [Buffer.from(text.replace(/\s/g, ""), "base64")] : [])];
    for (const der of ders) {
      key = attempt(() => createPrivateKey({ key: der, format: "der", type: "pkcs8" }));
      if (key) break;
      if (attempt(() => createPublicKey({ key: der, format: "der", type: "spki" }))) throw isPublic();
    }
    if (!key)
      throw new Error(`${where} is not a private key (PKCS#8 PEM, DER, or the base64 of that DER): ${MAKE_ONE}`);
  }
  mustBeEd25519(key, where, "key");
  return key;
}

/** The ed25519 public key in `text` (PEM, or base64 DER); throws with what is wrong. */
export function parsePublicKey(text: string, where = "the public key"): TrustedKey {
  const t = text.trim();
  const label = pemLabel(t);
  const isPrivate = () =>
    new Error(
      `${where} is a private key: never put it in a stack's config (replace it where it was exposed); give ` +
        `its public key: the line molt keygen printed, or openssl pkey -in <file> -pubout`,
    );
  let key: KeyObject | undefined;
  if (label !== undefined) {
    if (/PRIVATE KEY/.test(label)) throw isPrivate();
    if (label !== "PUBLIC KEY")
      throw new Error(`${where} is a PEM "${label}"; give a "PUBLIC KEY" (openssl pkey -in <file> -pubout)`);
    key = attempt(() => createPublicKey({ key: t, format: "pem" }));
  } else if (/^ssh-/.test(t)) {
    throw new Error(`${where} is an OpenSSH public key; give the base64 line molt keygen prints, or a PEM public key`);
  } else if (BASE64.test(t)) {
    const der = Buffer.from(t.replace(/\s/g, ""), "base64");
    key = attempt(() => createPublicKey({ key: der, format: "der", type: "spki" }));
    if (!key && attempt(() => createPrivateKey({ key: der, format: "der", type: "pkcs8" }))) throw isPrivate();
  }
  if (!key)
    throw new Error(
      `${where} is not a public key: give the base64 line molt keygen prints ("MCowBQYDK2VwAyEA..."), ` +
        `or the PEM of openssl pkey -in <file> -pubout`,
    );
  mustBeEd25519(key, where, "public key");
  const der = key.export({ format: "der", type: "spki" });
  return { key, base64: der.toString("base64"), keyId: keyIdOf(der) };
}

export function signerOf(privateKey: KeyObject): RecordSigner {
  const der = createPublicKey(privateKey).export({ format: "der", type: "spki" });
  return {
    keyId: keyIdOf(der),
    publicKey: der.toString("base64"),
    sign: (data) => sign(null, data, privateKey).toString("base64"),
  };
}

/** Does `signature` (base64) sign `data` under `key`? */
export function signatureValid(data: Buffer, signature: string, key: KeyObject): boolean {
  const sig = Buffer.from(signature, "base64");
  if (sig.length !== 64) return false;
  return attempt(() => verify(null, data, key, sig)) === true;
}

/** Is `text` a key as one base64 line (private or public), rather than a path? */
function isBase64Key(text: string): boolean {
  if (!BASE64.test(text)) return false;
  const der = Buffer.from(text.replace(/\s/g, ""), "base64");
  return (
    attempt(() => createPrivateKey({ key: der, format: "der", type: "pkcs8" })) !== undefined ||
    attempt(() => createPublicKey({ key: der, format: "der", type: "spki" })) !== undefined
  );
}

function readKeyFile(path: string, where: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(
      code === "ENOENT"
        ? `${where} does not exist`
        : code === "EISDIR"
          ? `${where} is a folder, not a key file`
          : code === "EACCES" || code === "EPERM"
            ? `${where} cannot be read (permission denied): run molt as a user that may read it`
            : `${where} cannot be read (${code ?? (e as Error).message})`,
    );
  }
}

/**
 * The signer of the signing environment: `--signing-key <file>`, else $MOLT_SIGNING_KEY_FILE,
 * else $MOLT_SIGNING_KEY; undefined when none is given (the record is written unsigned).
 * SigningKeyError (exit 2) for a key that cannot be used, before anything is changed.
 */
export function loadSigner(o: { file?: string; env: Record<string, string | undefined> }): RecordSigner | undefined {
  const fromEnvFile = o.env[SIGNING_KEY_FILE_ENV] || undefined;
  const fromEnv = o.env[SIGNING_KEY_ENV] || undefined;
  try {
    if (o.file !== undefined) {
      // A key pasted where its path belongs would otherwise be printed back in "does not exist".
      if (/-----BEGIN|[\r\n]/.test(o.file) || o.file.length > 4096 || isBase64Key(o.file))
        throw new Error(
          `--signing-key takes the path of a key file, not the key itself (a key on a command line shows in ` +
            `process lists and shell history): put it in a file, or in ${SIGNING_KEY_ENV} from the CI secret store`,
        );
      const where = `the signing key file ${o.file} (--signing-key)`;
      return signerOf(parsePrivateKey(readKeyFile(o.file, where), where));
    }
    if (fromEnvFile && fromEnv)
      throw new Error(`both ${SIGNING_KEY_FILE_ENV} and ${SIGNING_KEY_ENV} are set: set one of them`);
    if (fromEnvFile) {
      const where = `the signing key file ${fromEnvFile} (${SIGNING_KEY_FILE_ENV})`;
      return signerOf(parsePrivateKey(readKeyFile(fromEnvFile, where), where));
    }
    if (fromEnv) return signerOf(parsePrivateKey(Buffer.from(fromEnv), `the key in ${SIGNING_KEY_ENV}`));
    return undefined;
  } catch (e) {
    throw new SigningKeyError(`cannot sign verification records: ${(e as Error).message}`);
  }
}

/** A new key pair: the private key as PKCS#8 PEM (what openssl genpkey writes), the public key as one base64 line. */
export function generateSigningKeyPair(): { privatePem: string; publicKey: string; keyId: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const der = publicKey.export({ format: "der", type: "spki" });
  return {
    privatePem: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    publicKey: der.toString("base64"),
    keyId: keyIdOf(der),
  };
}
