// The bench's command line: `npm run bench -- [--quick] [--only SECTION]...` and
// MOLT_BENCH_DATA_MIB. Pure, so its refusals are table-tested (test/unit/bench-args.test.ts).
export const SECTIONS = ["k8s", "k8s-then", "k8s-reset", "k8s-raw", "scaling", "raw", "baseline", "catchup"] as const;
export type Section = (typeof SECTIONS)[number];

export const USAGE = `usage: npm run bench -- [--quick] [--only SECTION]...
  --quick         3 and 5 nodes, 64 MiB keyspace, one raw-work round (about 20 min)
  --only SECTION  run one section (repeatable): ${SECTIONS.join(" | ")}
                  (k8s-then: the README upgrade on the code when issue #30 was filed, commit
                  7f73438, checked out under ~/.cache/molt/bench-then and run by its own bench,
                  for goal 4; k8s-reset: today's code with a reset before each destroy, the
                  reset's share alone)
Full run: 3/5/7/9 nodes, 1 GiB keyspace, two raw-work rounds (about 40 min on 2 cores).
Writes bench/results/latest.json (latest-partial.json with --only) and the timelines.
MOLT_BENCH_DATA_MIB overrides the keyspace size.`;

export class BenchArgsError extends Error {}

export interface BenchArgs {
  help: boolean;
  quick: boolean;
  only: Section[];
  dataMiB: number;
}

export function parseBenchArgs(args: readonly string[], env: NodeJS.ProcessEnv): BenchArgs {
  const only: Section[] = [];
  let quick = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "--help" || a === "-h") return { help: true, quick, only, dataMiB: 0 };
    if (a === "--quick") {
      quick = true;
      continue;
    }
    const section = a === "--only" ? args[++i] : a.startsWith("--only=") ? a.slice(7) : undefined;
    if (section === undefined && a !== "--only") throw new BenchArgsError(`unknown argument ${JSON.stringify(a)}`);
    if (!section) throw new BenchArgsError("--only needs a section");
    if (!(SECTIONS as readonly string[]).includes(section))
      throw new BenchArgsError(`--only ${JSON.stringify(section)}: not a section (one of ${SECTIONS.join(", ")})`);
    only.push(section as Section);
  }
  const mib = env.MOLT_BENCH_DATA_MIB;
  if (mib !== undefined && !/^[1-9]\d*$/.test(mib))
    throw new BenchArgsError(`MOLT_BENCH_DATA_MIB=${mib}: a whole number of MiB (>= 1)`);
  return { help: false, quick, only, dataMiB: Number(mib ?? (quick ? 64 : 1024)) };
}
