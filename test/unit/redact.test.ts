// Secrets out of what molt reports (orchestrator/report/redact.ts): the well-known shapes, the
// secrets molt holds, a private key printed line by line, and two properties: a generated
// GitHub token or AWS key never survives, and redacting twice changes nothing.
import * as assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import {
  displayUrl,
  LineRedactor,
  redactDeep,
  redactText,
  rememberEnvSecrets,
  rememberSecret,
} from "../../orchestrator/report/redact";
import { rememberStateSecrets } from "../../orchestrator/stack/state";

const PEM = [
  "-----BEGIN OPENSSH PRIVATE KEY-----",
  "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
  "QyNTUxOQAAACDhiddenkeymaterial",
  "-----END OPENSSH PRIVATE KEY-----",
].join("\n");

describe("redaction (report/redact.ts)", () => {
  const table: [string, string, string][] = [
    ["a classic GitHub token", "push with ghp_0123456789abcdefghijABCDEFGHIJ012345 now", "push with [redacted] now"],
    ["an OAuth GitHub token", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "[redacted]"],
    ["a fine-grained GitHub token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[redacted]"],
    ["an AWS access key id", "key AKIAIOSFODNN7EXAMPLE in use", "key [redacted] in use"],
    ["a Bearer token", "Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [redacted]"],
    ["a Basic header", "authorization: Basic dXNlcjpwYXNz", "authorization: Basic [redacted]"],
    ["password=", "login password=hunter2 ok", "login password=[redacted] ok"],
    ["a quoted password=", `DB_PASSWORD="two words"`, `DB_PASSWORD=[redacted]`],
    ["token= in a query", "GET /x?token=abc&page=2", "GET /x?token=[redacted]&page=2"],
    ["secret: in YAML", "client_secret: s3cr3tvalue", "client_secret: [redacted]"],
    ["a kubeconfig's client key", "    client-key-data: LS0tLS1CRUdJTg==", "    client-key-data: [redacted]"],
    ["JSON password", `{"user":"a","password": "p\\"w"}`, `{"user":"a","password": "[redacted]"}`],
    ["URL user info", "https://bob:pa55@git.example.com/r.git", "https://[redacted]@git.example.com/r.git"],
    [
      "a PEM private key",
      `key:\n${PEM}\ndone`,
      "key:\n-----BEGIN OPENSSH PRIVATE KEY-----[redacted]-----END OPENSSH PRIVATE KEY-----\ndone",
    ],
    [
      "a PEM key cut off",
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA",
      "-----BEGIN RSA PRIVATE KEY-----[redacted]",
    ],
    ["a JWT", "token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl end", "token [redacted] end"],
    ["a Slack token", "xoxb-123456789012-abcdefABCDEF", "[redacted]"],
    ["a kubeadm bootstrap token", "kubeadm join --token abcdef.0123456789abcdef", "kubeadm join --token [redacted]"],
  ];
  for (const [what, input, output] of table)
    it(`redacts ${what}`, () => {
      assert.equal(redactText(input), output);
    });

  it("leaves ordinary text alone (a certificate, a hash, a word after 'token:')", () => {
    for (const s of [
      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
      "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
      "new node lab-cp-4 is healthy: run the postJoin hook before any old node retires",
      "token: no",
      "https://hooks.example.com/x",
    ])
      assert.equal(redactText(s), s);
  });

  it("a secret molt holds is never reported; short ones are not looked for", () => {
    rememberSecret("a-passphrase-from-the-env");
    rememberSecret("short");
    assert.equal(redactText("passphrase a-passphrase-from-the-env!"), "passphrase [redacted]!");
    assert.equal(redactText("short"), "short");
  });

  it("remembers the secrets of the environment and the passphrase files", () => {
    const dir = mkdtempSync(join(tmpdir(), "molt-redact-"));
    try {
      writeFileSync(join(dir, "pass"), "passphrase-in-a-file\n");
      writeFileSync(join(dir, "passphrase"), "the-generated-passphrase\n");
      rememberEnvSecrets(
        {
          PULUMI_CONFIG_PASSPHRASE_FILE: join(dir, "pass"),
          AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
          PULUMI_ACCESS_TOKEN: "pul-0123456789abcdef",
        },
        dir,
      );
      assert.equal(
        redactText(
          "passphrase-in-a-file wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY pul-0123456789abcdef " +
            "the-generated-passphrase",
        ),
        "[redacted] [redacted] [redacted] [redacted]",
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("remembers the join material and keys a stack export holds as secrets, not its other outputs", () => {
    const secret = (v: unknown) => ({
      "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
      plaintext: JSON.stringify(v),
    });
    rememberStateSecrets([
      {
        outputs: {
          token: secret("k8sjoin.abcdefghijklmnop"),
          certificateKey: secret("c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"),
          caCertHash: "sha256:abcdefabcdef",
          seed: secret({ host: "10.0.0.11", user: "root", privateKey: "seed-private-key-text" }),
        },
      },
      { outputs: { token: "guard-token-not-secret" } },
    ]);
    assert.equal(
      redactText("c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00 seed-private-key-text"),
      "[redacted] [redacted]",
    );
    assert.equal(redactText("10.0.0.11 root guard-token-not-secret"), "10.0.0.11 root guard-token-not-secret");
  });

  it("a private key printed line by line: its BEGIN line redacted, its body not reported at all", () => {
    const r = new LineRedactor();
    const out = [...PEM.split("\n"), "after the key, password=x"].map((l) => r.line(l));
    assert.deepEqual(out, [
      "-----BEGIN OPENSSH PRIVATE KEY-----[redacted]",
      undefined,
      undefined,
      "-----END OPENSSH PRIVATE KEY-----",
      "after the key, password=[redacted]",
    ]);
  });

  it("redacts every string inside an event, numbers and bigints as they were", () => {
    const e = { type: "hook", ms: 5, id: 7n, ok: false, nested: ["password=a", { s: "ghp_0123456789abcdefghijABCD" }] };
    assert.deepEqual(redactDeep(e), {
      type: "hook",
      ms: 5,
      id: 7n,
      ok: false,
      nested: ["password=[redacted]", { s: "[redacted]" }],
    });
  });

  it("shows a URL without user info, query or fragment", () => {
    assert.equal(
      displayUrl("https://user:pw@hooks.example.com:8443/x/y?token=1#f"),
      "https://hooks.example.com:8443/x/y",
    );
  });

  describe("properties (fast-check)", () => {
    const alnum = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".split(""));
    const upperAlnum = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".split(""));
    const ghToken = fc
      .tuple(fc.constantFrom("ghp_", "gho_", "ghs_", "ghu_", "ghr_"), fc.array(alnum, { minLength: 36, maxLength: 36 }))
      .map(([p, cs]) => p + cs.join(""));
    const awsKey = fc
      .tuple(fc.constantFrom("AKIA", "ASIA"), fc.array(upperAlnum, { minLength: 16, maxLength: 16 }))
      .map(([p, cs]) => p + cs.join(""));
    const text = fc.string({ unit: "binary-ascii", maxLength: 60 });

    it("never leaves a GitHub token or an AWS access key in its output, whatever surrounds it", () => {
      fc.assert(
        fc.property(text, fc.oneof(ghToken, awsKey), text, (before, secret, after) => {
          assert.ok(!redactText(before + secret + after).includes(secret));
        }),
        { numRuns: 2000 },
      );
    });

    it("is idempotent: redacting what it redacted changes nothing", () => {
      const pieces = fc.oneof(
        text,
        ghToken,
        awsKey,
        fc.constantFrom(
          "password=",
          "token: ",
          '"secret": "',
          "Authorization: Basic ",
          "Bearer ",
          "https://u:p@h/",
          "-----BEGIN RSA PRIVATE KEY-----",
          "-----END RSA PRIVATE KEY-----",
          "[redacted]",
          ")",
          "\n",
        ),
      );
      fc.assert(
        fc.property(fc.array(pieces, { maxLength: 12 }), (ps) => {
          const once = redactText(ps.join(""));
          assert.equal(redactText(once), once);
        }),
        { numRuns: 3000 },
      );
    });
  });
});
