// `npm run bench` refuses bad input before it touches the lab: what is wrong, the usage, exit 2.
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { BenchArgsError, parseBenchArgs } from "../../bench/args";

describe("bench arguments", () => {
  for (const [args, env, says] of [
    [["--bogus"], {}, /unknown argument "--bogus"/],
    [["--only"], {}, /--only needs a section/],
    [["--only="], {}, /--only needs a section/],
    [
      ["--only", "nope"],
      {},
      /--only "nope": not a section \(one of k8s, k8s-then, k8s-reset, k8s-raw, scaling, raw, baseline, catchup\)/,
    ],
    [["--quick", "--only=raw", "--only", "k8ss"], {}, /--only "k8ss": not a section/],
    // Renamed: it was today's code plus a reset, not the code when issue #30 was filed (k8s-then).
    [["--only", "k8s-today"], {}, /--only "k8s-today": not a section \(one of k8s, k8s-then, k8s-reset,/],
    [["--only", "k8s-then", "--only"], {}, /--only needs a section/],
    [["--only", "K8S-THEN"], {}, /--only "K8S-THEN": not a section/],
    [[], { MOLT_BENCH_DATA_MIB: "1.5" }, /MOLT_BENCH_DATA_MIB=1.5: a whole number of MiB/],
    [[], { MOLT_BENCH_DATA_MIB: "0" }, /MOLT_BENCH_DATA_MIB=0: a whole number of MiB \(>= 1\)/],
    [[], { MOLT_BENCH_DATA_MIB: "" }, /MOLT_BENCH_DATA_MIB=: a whole number/],
  ] as [string[], Record<string, string>, RegExp][]) {
    it(`refuses ${JSON.stringify(args)} ${JSON.stringify(env)}, saying what is wrong`, () =>
      assert.throws(
        () => parseBenchArgs(args, env),
        (e: Error) => e instanceof BenchArgsError && says.test(e.message),
      ));
  }

  it("reads sections, --quick and the keyspace size", () => {
    assert.deepEqual(parseBenchArgs(["--only", "k8s", "--only", "k8s-then"], {}).only, ["k8s", "k8s-then"]);
    assert.deepEqual(parseBenchArgs(["--quick", "--only", "raw", "--only=scaling"], {}), {
      help: false,
      quick: true,
      only: ["raw", "scaling"],
      dataMiB: 64,
    });
    assert.equal(parseBenchArgs([], {}).dataMiB, 1024);
    assert.equal(parseBenchArgs([], { MOLT_BENCH_DATA_MIB: "16" }).dataMiB, 16);
    assert.equal(parseBenchArgs(["--help"], {}).help, true);
  });

  it("exits 2 on bad input before touching the lab, with the usage", function () {
    this.timeout(60_000);
    const r = spawnSync(process.execPath, [join(__dirname, "..", "..", "bench", "run.js"), "--only", "nope"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /bench: --only "nope": not a section .*; nothing was run/);
    assert.match(r.stderr, /usage: npm run bench -- \[--quick\] \[--only SECTION\]/);
  });
});
