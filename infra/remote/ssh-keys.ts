// SSH keys as OpenSSH writes them: ed25519 pairs made from node:crypto, public key lines,
// blobs and SHA256 fingerprints.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { utils } from "ssh2";

/** OpenSSH's SHA256 fingerprint of a public key line ("SHA256:base64-without-padding"). */
export function fingerprintOf(line: string): string {
  return fingerprintOfBlob(publicKeyBlob(line));
}

export function fingerprintOfBlob(blob: Buffer): string {
  return "SHA256:" + createHash("sha256").update(blob).digest("base64").replace(/=+$/, "");
}

/** The raw key blob of an authorized_keys-style public key line. */
export function publicKeyBlob(line: string): Buffer {
  const parsed = utils.parseKey(line.trim());
  if (parsed instanceof Error) throw new Error(`not a valid SSH public key: ${parsed.message}`);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  return key.getPublicSSH();
}

/** An OpenSSH public key line ("ssh-ed25519 AAAA...") of a raw key blob. */
export function publicKeyLine(blob: Buffer): string {
  const len = blob.readUInt32BE(0);
  return `${blob.subarray(4, 4 + len).toString()} ${blob.toString("base64")}`;
}

/**
 * Generates an ed25519 key pair in OpenSSH format from node:crypto. (ssh2's own generator
 * drops leading zero bytes of the key material, so about one key in 128 is one OpenSSH
 * refuses to load: "error in libcrypto".)
 */
export function generateSshKeyPair(comment: string): { privateKey: string; publicKey: string } {
  // Encoded inside the generation itself: exporting a fresh KeyObject (e.g. as JWK) can
  // deadlock Node 20 when a garbage collection finalises its key-generation job meanwhile.
  // SPKI/PKCS#8 DER of an ed25519 key end with the 32-byte public key / seed.
  const { publicKey, privateKey } = generateKeyPairSync("ed25519", {
    publicKeyEncoding: { type: "spki", format: "der" },
    privateKeyEncoding: { type: "pkcs8", format: "der" },
  });
  return openSshKeyPair(
    privateKey.subarray(privateKey.length - 32),
    publicKey.subarray(publicKey.length - 32),
    comment,
  );
}

/** The ed25519 key pair of a 32-byte seed, in OpenSSH format (the same seed, the same keys). */
export function sshKeyPairFromSeed(seed: Buffer, comment: string): { privateKey: string; publicKey: string } {
  if (seed.length !== 32) throw new Error("an ed25519 seed is 32 bytes");
  // PKCS#8 DER of an ed25519 private key: a fixed prefix, then the seed; SPKI DER of the
  // public key ends with its 32 bytes.
  const pkcs8 = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
  const spki = createPublicKey(createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" })).export({
    type: "spki",
    format: "der",
  });
  return openSshKeyPair(seed, spki.subarray(spki.length - 32), comment);
}

function openSshKeyPair(seed: Buffer, pub: Buffer, comment: string): { privateKey: string; publicKey: string } {
  if (pub.length !== 32 || seed.length !== 32) throw new Error("unexpected ed25519 key length");
  const str = (b: Buffer | string) => {
    const buf = typeof b === "string" ? Buffer.from(b) : b;
    const len = Buffer.alloc(4);
    len.writeUInt32BE(buf.length);
    return Buffer.concat([len, buf]);
  };
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const pubBlob = Buffer.concat([str("ssh-ed25519"), str(pub)]);
  // The check integer only guards decryption; derived from the seed, the same seed gives the same file.
  const check = createHash("sha256").update(seed).digest().readUInt32BE(0);
  let section = Buffer.concat([
    u32(check),
    u32(check),
    str("ssh-ed25519"),
    str(pub),
    str(Buffer.concat([seed, pub])),
    str(comment),
  ]);
  const pad = (8 - (section.length % 8)) % 8;
  section = Buffer.concat([section, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const body = Buffer.concat([
    Buffer.from("openssh-key-v1\0"),
    str("none"),
    str("none"),
    str(""),
    u32(1),
    str(pubBlob),
    str(section),
  ]).toString("base64");
  const wrapped = body.match(/.{1,70}/g)!.join("\n");
  return {
    privateKey: `-----BEGIN OPENSSH PRIVATE KEY-----\n${wrapped}\n-----END OPENSSH PRIVATE KEY-----\n`,
    publicKey: `ssh-ed25519 ${pubBlob.toString("base64")} ${comment}`,
  };
}
