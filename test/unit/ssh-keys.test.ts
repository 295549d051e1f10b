// Host and client keys must load in OpenSSH every time: a bad key means a machine whose
// sshd never starts (ssh2's own generator made one such key in about 128).
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { utils } from "ssh2";
import { generateSshKeyPair, publicKeyBlob } from "../../infra/remote/ssh";

describe("SSH key generation", () => {
  it("makes 1000 ed25519 key pairs that ssh2 parses, with 32-byte key material", () => {
    for (let i = 0; i < 1000; i++) {
      const k = generateSshKeyPair(`key ${i}`);
      assert.equal(publicKeyBlob(k.publicKey).length, 4 + 11 + 4 + 32);
      const parsed = utils.parseKey(k.privateKey);
      assert.ok(!(parsed instanceof Error), `private key ${i} does not parse: ${String(parsed)}`);
      const key = Array.isArray(parsed) ? parsed[0] : parsed;
      assert.deepEqual(key.getPublicSSH(), publicKeyBlob(k.publicKey), "private and public halves match");
    }
  });

  it("makes keys OpenSSH loads and derives the same public key from", () => {
    const dir = mkdtempSync(join(tmpdir(), "molt-keys-"));
    try {
      for (let i = 0; i < 200; i++) {
        const k = generateSshKeyPair("host key");
        writeFileSync(join(dir, "k"), k.privateKey, { mode: 0o600 });
        const derived = execFileSync("ssh-keygen", ["-y", "-f", join(dir, "k")], { encoding: "utf8" })
          .trim()
          .split(" ")
          .slice(0, 2)
          .join(" ");
        assert.equal(derived, k.publicKey.split(" ").slice(0, 2).join(" "));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
