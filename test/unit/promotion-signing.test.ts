// Signing keys for verification records (orchestrator/promotion/signing.ts): the keys molt
// keygen and openssl make are read, every key that cannot sign or be trusted is refused with
// what to do, and no message ever carries a key's content.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolvePromotion } from "../../orchestrator/promotion/release";
import { redactText } from "../../orchestrator/report/redact";
import {
  generateSigningKeyPair,
  loadSigner,
  parsePublicKey,
  SigningKeyError,
  signatureValid,
} from "../../orchestrator/promotion/signing";
import { runCli } from "../support/cli";

/** Loads the key file argv[1] as molt does, printing the refusal (run as another user). */
const LOAD =
  `const { loadSigner } = require(${JSON.stringify(join(__dirname, "../../orchestrator/promotion/signing.js"))});` +
  `try { loadSigner({ file: process.argv[1], env: {} }); console.log("loaded"); } ` +
  `catch (e) { console.log(e.message); }`;

/** The secret part of a PEM or base64 key (what must never show in a message). */
const bodyOf = (pem: string) => pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s/g, "");

describe("signing keys for verification records", () => {
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), "molt-keys-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string | Buffer) => {
    const p = join(dir, name);
    writeFileSync(p, content);
    return p;
  };
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });

  describe("keys made by molt keygen and by openssl", () => {
    it("a generated pair signs and verifies; the public key parses to the signer's id", () => {
      const k = generateSigningKeyPair();
      const signer = loadSigner({ env: { MOLT_SIGNING_KEY: k.privatePem } })!;
      assert.equal(signer.keyId, k.keyId);
      assert.equal(signer.publicKey, k.publicKey);
      const trusted = parsePublicKey(k.publicKey);
      assert.equal(trusted.keyId, k.keyId);
      const sig = signer.sign(Buffer.from("record"));
      assert.ok(signatureValid(Buffer.from("record"), sig, trusted.key));
      assert.ok(!signatureValid(Buffer.from("recorD"), sig, trusted.key));
      assert.ok(!signatureValid(Buffer.from("record"), sig, parsePublicKey(generateSigningKeyPair().publicKey).key));
    });

    it("reads openssl genpkey's ed25519 key (PEM, DER) and trusts openssl pkey -pubout's (PEM, base64 DER)", () => {
      openssl("genpkey", "-algorithm", "ed25519", "-out", "ossl.pem");
      openssl("pkey", "-in", "ossl.pem", "-outform", "DER", "-out", "ossl.der");
      const pubPem = openssl("pkey", "-in", "ossl.pem", "-pubout").toString();
      const pubB64 = openssl("pkey", "-in", "ossl.pem", "-pubout", "-outform", "DER").toString("base64");
      const fromPem = loadSigner({ file: join(dir, "ossl.pem"), env: {} })!;
      const fromDer = loadSigner({ env: { MOLT_SIGNING_KEY_FILE: join(dir, "ossl.der") } })!;
      const fromB64 = loadSigner({
        env: { MOLT_SIGNING_KEY: readFileSync(join(dir, "ossl.der")).toString("base64") },
      })!;
      assert.equal(fromDer.keyId, fromPem.keyId);
      assert.equal(fromB64.keyId, fromPem.keyId);
      for (const pub of [pubPem, pubB64]) {
        const t = parsePublicKey(pub);
        assert.equal(t.keyId, fromPem.keyId);
        assert.ok(signatureValid(Buffer.from("x"), fromPem.sign(Buffer.from("x")), t.key));
      }
      // And openssl verifies what molt signed: the signature is plain ed25519.
      writeFileSync(join(dir, "msg"), "molt");
      writeFileSync(join(dir, "msg.sig"), Buffer.from(fromPem.sign(Buffer.from("molt")), "base64"));
      writeFileSync(join(dir, "pub.pem"), pubPem);
      const out = openssl(
        "pkeyutl",
        "-verify",
        "-pubin",
        "-inkey",
        "pub.pem",
        "-rawin",
        "-in",
        "msg",
        "-sigfile",
        "msg.sig",
      );
      assert.match(out.toString(), /Signature Verified Successfully/);
    });

    it("a key molt read is never reported again (redacted wherever it shows)", () => {
      const k = generateSigningKeyPair();
      const b64 = bodyOf(k.privatePem);
      loadSigner({ env: { MOLT_SIGNING_KEY: b64 } });
      assert.equal(redactText(`key ${b64} in a hook's output`), "key [redacted] in a hook's output");
    });

    it("no key anywhere: no signer (records are written unsigned)", () =>
      assert.equal(loadSigner({ env: { MOLT_SIGNING_KEY: "", MOLT_SIGNING_KEY_FILE: "" } }), undefined));

    it("--signing-key wins over the environment", () => {
      const a = generateSigningKeyPair();
      const b = generateSigningKeyPair();
      const s = loadSigner({ file: file("a.pem", a.privatePem), env: { MOLT_SIGNING_KEY: b.privatePem } })!;
      assert.equal(s.keyId, a.keyId);
    });
  });

  describe("private keys that cannot sign: refused, saying what to do, never quoting the key", () => {
    const ed = generateSigningKeyPair();
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const ec = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const x25519 = generateKeyPairSync("x25519");
    const pem = (k: { export(o: object): string | Buffer }, type = "pkcs8") =>
      k.export({ format: "pem", type }).toString();
    const edPublicPem = pem(parsePublicKey(ed.publicKey).key, "spki");
    const rows: [string, () => { file?: string; env: Record<string, string> }, RegExp, string?][] = [
      [
        "a key file that does not exist",
        () => ({ file: join(dir, "missing.pem"), env: {} }),
        /the signing key file .*missing\.pem \(--signing-key\) does not exist/,
      ],
      [
        "a MOLT_SIGNING_KEY_FILE that does not exist",
        () => ({ env: { MOLT_SIGNING_KEY_FILE: join(dir, "gone.pem") } }),
        /gone\.pem \(MOLT_SIGNING_KEY_FILE\) does not exist/,
      ],
      [
        "a folder where the key file belongs",
        () => (mkdirSync(join(dir, "adir"), { recursive: true }), { file: join(dir, "adir"), env: {} }),
        /is a folder, not a key file/,
      ],
      [
        "an empty key file",
        () => ({ file: file("empty.pem", ""), env: {} }),
        /is empty: make a key pair with `molt keygen/,
      ],
      [
        "a file that is no key",
        () => ({ file: file("junk.pem", "hello\nworld\n"), env: {} }),
        /is not a private key \(PKCS#8 PEM, DER, or the base64 of that DER\)/,
      ],
      [
        "an RSA key",
        () => ({ file: file("rsa.pem", pem(rsa.privateKey)), env: {} }),
        /is an rsa key; molt signs records with ed25519 only/,
        pem(rsa.privateKey),
      ],
      ["an EC key", () => ({ env: { MOLT_SIGNING_KEY: pem(ec.privateKey) } }), /is an ec key/, pem(ec.privateKey)],
      ["an x25519 key", () => ({ env: { MOLT_SIGNING_KEY: pem(x25519.privateKey) } }), /is an x25519 key/],
      [
        "the public key (PEM) where the private key is expected",
        () => ({ file: file("pub.pem", edPublicPem), env: {} }),
        /holds a public key, where the private key is needed/,
      ],
      [
        "the public key (base64, as keygen prints it) in MOLT_SIGNING_KEY",
        () => ({ env: { MOLT_SIGNING_KEY: ed.publicKey } }),
        /the key in MOLT_SIGNING_KEY holds a public key/,
      ],
      [
        "an OpenSSH public key line",
        () => ({ env: { MOLT_SIGNING_KEY: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE user@host" } }),
        /holds a public key/,
      ],
      [
        "an encrypted PEM",
        () => {
          openssl("genpkey", "-algorithm", "ed25519", "-aes256", "-pass", "pass:secret-pass", "-out", "enc.pem");
          return { file: join(dir, "enc.pem"), env: {} };
        },
        /is encrypted with a passphrase, which molt does not take/,
      ],
      [
        "an OpenSSH private key",
        () => ({
          file: file(
            "id_ed25519",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
          ),
          env: {},
        }),
        /is an OpenSSH key, which node:crypto cannot read/,
      ],
      [
        "both MOLT_SIGNING_KEY_FILE and MOLT_SIGNING_KEY",
        () => ({ env: { MOLT_SIGNING_KEY_FILE: file("k1.pem", ed.privatePem), MOLT_SIGNING_KEY: ed.privatePem } }),
        /both MOLT_SIGNING_KEY_FILE and MOLT_SIGNING_KEY are set: set one of them/,
        ed.privatePem,
      ],
      [
        "the key itself (PEM) given to --signing-key",
        () => ({ file: ed.privatePem, env: {} }),
        /--signing-key takes the path of a key file, not the key itself/,
        ed.privatePem,
      ],
      [
        "the key itself (base64 DER) given to --signing-key",
        () => ({ file: bodyOf(ed.privatePem), env: {} }),
        /--signing-key takes the path of a key file, not the key itself/,
        ed.privatePem,
      ],
    ];
    for (const [what, input, want, secret] of rows)
      it(`refuses ${what}`, () => {
        assert.throws(
          () => loadSigner(input()),
          (e: Error) => {
            assert.ok(e instanceof SigningKeyError, `${e.name}: ${e.message}`);
            assert.match(e.message, want);
            assert.match(e.message, /^cannot sign verification records: .*; nothing was changed$/s);
            if (secret) assert.ok(!e.message.includes(bodyOf(secret).slice(0, 40)), "the key is not in the message");
            assert.doesNotMatch(e.message, /secret-pass/);
            return true;
          },
        );
      });

    it("refuses a key file it may not read (permission denied)", () => {
      const key = file("locked.pem", ed.privatePem);
      chmodSync(key, 0o000);
      chmodSync(dir, 0o755);
      // root reads any file: the check runs as nobody then, as a CI runner's user would.
      const message =
        process.getuid?.() === 0
          ? execFileSync(
              "setpriv",
              ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", LOAD, key],
              { encoding: "utf8" },
            )
          : (() => {
              try {
                loadSigner({ file: key, env: {} });
                return "loaded";
              } catch (e) {
                return (e as Error).message;
              }
            })();
      assert.match(message, /locked\.pem \(--signing-key\) cannot be read \(permission denied\)/);
    });

    it("takes a long path that only looks like base64 as a path", () =>
      assert.throws(
        () => loadSigner({ file: "/home/runner/work/secrets/signing/key0123456789abcdefABCDEF", env: {} }),
        /key0123456789abcdefABCDEF \(--signing-key\) does not exist/,
      ));
  });

  describe("trusted public keys in molt:promotion.requireVerifiedOn", () => {
    const ed = generateSigningKeyPair();
    const promotion = (source: unknown) => {
      const problems: string[] = [];
      const r = resolvePromotion({ "molt:promotion": { requireVerifiedOn: [source] } }, "prod", problems);
      return { sources: r.promotion.requireVerifiedOn, problems };
    };
    it("keeps the plain stack name form working (no key)", () =>
      assert.deepEqual(promotion("staging"), { sources: [{ stack: "staging" }], problems: [] }));
    it("takes the base64 line keygen prints, and a PEM public key, as the same key", () => {
      const pemKey = parsePublicKey(ed.publicKey).key.export({ format: "pem", type: "spki" }).toString();
      for (const publicKey of [ed.publicKey, pemKey])
        assert.deepEqual(promotion({ stack: "staging", publicKey }), {
          sources: [{ stack: "staging", publicKey: ed.publicKey }],
          problems: [],
        });
    });
    const rsaPub = generateKeyPairSync("rsa", { modulusLength: 2048 })
      .publicKey.export({ format: "pem", type: "spki" })
      .toString();
    const rows: [string, unknown, RegExp, string?][] = [
      [
        "a private key (PEM)",
        ed.privatePem,
        /publicKey: it is a private key: never put it in a stack's config/,
        ed.privatePem,
      ],
      ["a private key (base64 DER)", bodyOf(ed.privatePem), /publicKey: it is a private key/, ed.privatePem],
      ["an RSA public key", rsaPub, /publicKey: it is an rsa public key; molt signs records with ed25519 only/],
      ["an OpenSSH public key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE", /publicKey: it is an OpenSSH public key/],
      ["no key at all", "not-a-key", /publicKey: it is not a public key: give the base64 line molt keygen prints/],
      ["a truncated key", ed.publicKey.slice(0, 30), /publicKey: it is not a public key/],
    ];
    for (const [what, publicKey, want, secret] of rows)
      it(`refuses ${what}, without quoting it`, () => {
        const { problems } = promotion({ stack: "staging", publicKey });
        assert.equal(problems.length, 1, problems.join("\n"));
        assert.match(problems[0], new RegExp(`^molt:promotion\\.requireVerifiedOn\\.0\\.${want.source}`));
        assert.doesNotMatch(problems[0], /\(got /);
        if (secret) assert.ok(!problems[0].includes(bodyOf(secret).slice(0, 40)));
      });
    it("refuses a publicKey that is no string, without quoting the entry", () => {
      const { problems } = promotion({ stack: "staging", publicKey: { pem: ed.privatePem } });
      assert.equal(problems.length, 1, problems.join("\n"));
      assert.match(problems[0], /requireVerifiedOn\.0: a stack name, or \{ stack, backend\?, publicKey\? \}/);
      assert.doesNotMatch(problems[0], /\(got /);
    });
  });

  describe("molt keygen", () => {
    it("writes a private key (0600) that signs, and prints the public key the config takes", async () => {
      const out = join(dir, "keygen.pem");
      const run = await runCli(["keygen", "--out", out, "--json"], {});
      assert.equal(run.code, 0, run.stdout + run.stderr);
      const e = run.events[0] as { type: string; publicKey: string; keyId: string; privateKeyFile: string };
      assert.equal(e.type, "keygen");
      assert.equal(statSync(out).mode & 0o777, 0o600);
      const signer = loadSigner({ file: out, env: {} })!;
      assert.equal(signer.keyId, e.keyId);
      assert.equal(signer.publicKey, e.publicKey);
      assert.ok(!run.stdout.includes(bodyOf(readFileSync(out, "utf8"))), "the private key is not printed");
      // Readable by openssl as well.
      assert.match(openssl("pkey", "-in", out, "-noout", "-text").toString(), /ED25519 Private-Key/);
      const human = await runCli(["keygen", "--out", join(dir, "keygen2.pem")], {});
      assert.equal(human.code, 0);
      assert.match(human.stdout, /publicKey: MCowBQYDK2VwAyEA/);
    });
    it("never overwrites a key, and says when the folder is missing (exit 2)", async () => {
      const existing = file("exists.pem", "keep me");
      const a = await runCli(["keygen", "--out", existing, "--json"], {});
      assert.equal(a.code, 2);
      assert.match(String(a.events[0]?.message), /exists: molt never overwrites a key/);
      assert.equal(readFileSync(existing, "utf8"), "keep me");
      const b = await runCli(["keygen", "--out", join(dir, "no", "dir", "k.pem"), "--json"], {});
      assert.equal(b.code, 2);
      assert.match(String(b.events[0]?.message), /its folder does not exist/);
    });
  });
});
