// The user guide (README.md and docs/) kept in step with the code, so the docs cannot drift:
// every key of the stack file's zod schemas has a row in docs/configuration.md and every row
// there is a key; every CLI command and flag is in docs/operations.md under its command, and
// every flag there exists; every exit code is in its table; every relative link and #anchor
// resolves; every page of docs/ is linked from the README.
import * as assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { z } from "zod";
import { baseSections, KNOWN_KEYS } from "../../orchestrator/config/schema";
import { apiEndpointSchema } from "../../orchestrator/config/endpoint";
import { promotionSchema, releaseSchema } from "../../orchestrator/promotion/release";
import { cloudCommonSections } from "../../infra/providers/cloud-config";
import { PROVIDERS } from "../../infra/providers/registry";
import { main } from "../../orchestrator/cli/main";
import { EXIT } from "../../orchestrator/cli/exit";
import { repoRoot } from "../../orchestrator/stack/engine";
import { isChange } from "../../orchestrator/act";
import type { Operation } from "../../orchestrator/core/model";

const read = (path: string) => readFileSync(join(repoRoot, path), "utf8");

/** The guide's pages: README.md and every Markdown file under docs/. */
function pages(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(repoRoot, dir)).flatMap((f) => {
      const p = join(dir, f);
      return statSync(join(repoRoot, p)).isDirectory() ? walk(p) : p.endsWith(".md") ? [p] : [];
    });
  return ["README.md", ...walk("docs")];
}

// ---- the stack file's keys, from the schemas themselves ----

type Def = {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  options?: z.ZodType[];
  element?: z.ZodType;
  valueType?: z.ZodType;
  left?: z.ZodType;
  right?: z.ZodType;
  getter?: () => z.ZodType;
};
const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;
const WRAPPERS = ["optional", "nullable", "default", "prefault", "readonly", "catch", "nonoptional"];

/**
 * Every documented path of a schema: `molt:rollout.maxSurge`; a record's key is `*`
 * (`molt:aws.tags.*`). Leaves are the keys a user writes a value for; `sections` are the
 * objects that hold them (documented through their leaves).
 */
function keyPaths(prefix: string, schema: z.ZodType, out: { leaves: Set<string>; sections: Set<string> }): void {
  let d = defOf(schema);
  for (;;) {
    if (WRAPPERS.includes(d.type)) d = defOf(d.innerType!);
    else if (d.type === "pipe") d = defOf(defOf(d.in!).type === "transform" ? d.out! : d.in!);
    else if (d.type === "lazy") d = defOf(d.getter!());
    else break;
  }
  switch (d.type) {
    case "object":
      // A Pulumi secret ({ secure: <ciphertext> }) is one value, written by `pulumi config set --secret`.
      if (Object.keys(d.shape!).join() === "secure") {
        out.leaves.add(prefix);
        return;
      }
      out.sections.add(prefix);
      for (const [k, v] of Object.entries(d.shape!)) keyPaths(`${prefix}.${k}`, v, out);
      return;
    case "union":
      for (const o of d.options!) keyPaths(prefix, o, out);
      return;
    case "intersection":
      keyPaths(prefix, d.left!, out);
      keyPaths(prefix, d.right!, out);
      return;
    case "record":
      out.sections.add(prefix);
      keyPaths(`${prefix}.*`, d.valueType!, out);
      return;
    case "array":
      // A list of objects documents the objects' keys; a list of values is a leaf.
      if (["object", "union"].includes(defOf(d.element!).type)) keyPaths(prefix, d.element!, out);
      else out.leaves.add(prefix);
      return;
    default:
      out.leaves.add(prefix);
  }
}

function stackFileKeys(): { leaves: Set<string>; sections: Set<string>; topLevel: Set<string> } {
  const out = { leaves: new Set<string>(), sections: new Set<string>() };
  const schemas: [string, z.ZodType][] = [
    ...Object.entries(baseSections),
    ...Object.entries(cloudCommonSections),
    ...PROVIDERS.flatMap((p) => Object.entries(p.sections as Record<string, z.ZodType>)),
    ["molt:apiEndpoint", apiEndpointSchema],
    ["molt:release", releaseSchema],
    ["molt:promotion", promotionSchema],
  ];
  for (const [key, schema] of schemas) keyPaths(key, schema, out);
  return { ...out, topLevel: new Set(schemas.map(([k]) => k)) };
}

/** `molt:aws.tags.*` as it is written in the docs: `molt:aws.tags.<name>` (any placeholder). */
const keyPattern = (path: string) =>
  new RegExp(
    "`" +
      path
        .split(".")
        .map((p) => (p === "*" ? "<[^>`\\s]+>" : p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("\\.") +
      "`",
  );

/** The first cell of every table row of a Markdown text. */
const firstCells = (md: string) =>
  md
    .split("\n")
    .filter((l) => l.startsWith("| ") && !/^\| -/.test(l))
    .map((l) => l.split("|")[1].trim());

describe("docs: the configuration reference (docs/configuration.md)", () => {
  const doc = read("docs/configuration.md");
  const keys = stackFileKeys();

  it("walks a schema for every key the stack file accepts", () => {
    // A new top-level key whose schema lives elsewhere must be added to the walk above.
    const missing = KNOWN_KEYS.filter((k) => !keys.topLevel.has(k));
    assert.deepEqual(missing, [], `keys with no schema in this test's walk: ${missing.join(", ")}`);
    assert.ok(keys.leaves.has("molt:rollout.maxSurge") && keys.leaves.has("molt:vsphere.failureDomains.*.datastore"));
  });

  it("has a row for every key of the schemas", () => {
    const rows = firstCells(doc).join("\n");
    const missing = [...keys.leaves, ...keys.topLevel]
      .filter((k) => !keyPattern(k).test(rows))
      // A section is documented by its own row or by the rows of its keys.
      .filter((k) => !(keys.sections.has(k) && [...keys.leaves].some((l) => l.startsWith(`${k}.`))));
    assert.deepEqual(missing, [], `document these keys in docs/configuration.md: ${missing.join(", ")}`);
  });

  it("names no key the schemas do not have", () => {
    const known = [...keys.leaves, ...keys.sections, ...keys.topLevel];
    const documented = firstCells(doc).flatMap((c) => [...c.matchAll(/`(molt:[^`\s]+)`/g)].map((m) => m[1]));
    assert.ok(documented.length > 100, `only ${documented.length} keys found in the reference's tables`);
    const unknown = documented.filter((d) => !known.some((k) => keyPattern(k).test(`\`${d}\``)));
    assert.deepEqual(unknown, [], `docs/configuration.md documents keys molt does not have: ${unknown.join(", ")}`);
  });
});

// ---- the command line, from `molt --help` ----

async function help(args: string[]): Promise<string> {
  const write = process.stdout.write.bind(process.stdout);
  let out = "";
  process.stdout.write = ((s: string) => ((out += s), true)) as typeof process.stdout.write;
  try {
    assert.equal(await main([...args, "--help"]), EXIT.ok);
  } finally {
    process.stdout.write = write;
  }
  return out;
}

/** The lines of a help text's section ("Options:", "Commands:") that start an entry. */
function helpEntries(text: string, section: string): string[] {
  const lines = text.split("\n");
  const start = lines.indexOf(`${section}:`);
  assert.ok(start >= 0, `no ${section} in:\n${text}`);
  const entries: string[] = [];
  for (const l of lines.slice(start + 1)) {
    if (!l.startsWith(" ")) break;
    const m = /^ {2}(\S.*?)(?: {2,}|$)/.exec(l);
    if (m) entries.push(m[1]);
  }
  return entries;
}

/** The section of a Markdown text under a heading, up to the next heading of its level or above. */
function section(md: string, heading: string): string | undefined {
  const lines = md.split("\n");
  const i = lines.indexOf(heading);
  if (i < 0) return undefined;
  const level = /^#+/.exec(heading)![0].length;
  const end = lines.findIndex((l, j) => j > i && /^#+ /.test(l) && /^#+/.exec(l)![0].length <= level);
  return lines.slice(i + 1, end < 0 ? undefined : end).join("\n");
}

describe("docs: the command line (docs/operations.md)", () => {
  const doc = read("docs/operations.md");

  it("documents every command with every flag it takes, and no flag it does not", async () => {
    const top = await help([]);
    const commands = helpEntries(top, "Commands")
      .map((e) => e.split(" ")[0])
      .filter((c) => c !== "help");
    assert.ok(commands.includes("rollout") && commands.includes("promote"), commands.join(", "));
    const problems: string[] = [];
    for (const command of commands) {
      const text = section(doc, `### molt ${command}`);
      if (text === undefined) {
        problems.push(`no "### molt ${command}" section`);
        continue;
      }
      // Flags as help prints them: "-s, --stack <name>"; --help itself needs no row.
      const flags = helpEntries(await help([command]), "Options")
        .flatMap((e) => e.split(/,\s*/).map((f) => f.split(" ")[0]))
        .filter((f) => f !== "-h" && f !== "--help");
      if (command === "version") flags.push("-V", "--version");
      const rows = firstCells(text).join(" ");
      // A row names the flag in code, alone or with its argument: `--stack <name>`.
      for (const f of flags)
        if (!new RegExp(`\`${f}[\` ]`).test(rows)) problems.push(`molt ${command}: ${f} has no row`);
      for (const m of rows.matchAll(/`(--?[A-Za-z][\w-]*)/g))
        if (!flags.includes(m[1])) problems.push(`molt ${command}: ${m[1]} is documented but is not a flag`);
    }
    assert.deepEqual(problems, []);
  });

  it("has every exit code in its table, and no other", () => {
    const table = section(doc, "## Exit codes");
    assert.ok(table, 'no "## Exit codes" section');
    const documented = firstCells(table)
      .filter((c) => /^\d+$/.test(c))
      .map(Number)
      .sort((a, b) => a - b);
    const codes = [...new Set(Object.values(EXIT))].sort((a, b) => a - b);
    assert.deepEqual(documented, codes);
  });
});

// ---- links ----

/** GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces as dashes. */
function slug(heading: string): string {
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, "").replace(/ /g, "-");
}

/** The anchors of a Markdown page (a repeated heading gets -1, -2, ... as on GitHub). */
function anchors(md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutCode(md).split("\n")) {
    const m = /^#{1,6} (.+)$/.exec(line);
    if (!m) continue;
    const s = slug(m[1]);
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n ? `${s}-${n}` : s);
  }
  return out;
}

/** A page without its fenced code blocks and inline code (links there are not links). */
const withoutCode = (md: string) =>
  md
    .split(/^```.*$/m)
    .filter((_, i) => i % 2 === 0)
    .join("\n");

/** Every [text](target) link of a page, outside code. */
const links = (md: string) =>
  [
    ...withoutCode(md)
      .replace(/`[^`\n]*`/g, "")
      .matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g),
  ].map((m) => m[1]);

describe("docs: the operations (docs/rollout.md)", () => {
  it("names only operations the planner has", () => {
    const notChanges: Operation["kind"][] = ["done", "wait", "refuse", "pause"];
    const named = [...read("docs/rollout.md").matchAll(/^\| (`[a-z-]+`(?: \/ `[a-z-]+`)*) \|/gm)].flatMap((m) =>
      m[1].split(" / ").map((k) => k.slice(1, -1)),
    );
    assert.ok(named.length >= 15, `the operation tables were found: ${named.join(", ")}`);
    const unknown = named.filter(
      (k) => !isChange({ kind: k } as Operation) && !notChanges.includes(k as Operation["kind"]),
    );
    assert.deepEqual(unknown, [], "renamed or removed: name the operation as the code does");
  });
});

describe("docs: links", () => {
  it("resolves every relative link and #anchor of README.md and docs/", () => {
    const problems: string[] = [];
    for (const page of pages()) {
      for (const target of links(read(page))) {
        if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
        const [path, anchor] = target.split("#");
        const file = path ? resolve(dirname(join(repoRoot, page)), path) : join(repoRoot, page);
        if (!existsSync(file)) {
          problems.push(`${page}: ${target}: no such file`);
          continue;
        }
        if (anchor !== undefined && file.endsWith(".md") && !anchors(readFileSync(file, "utf8")).has(anchor))
          problems.push(`${page}: ${target}: no heading #${anchor} in ${relative(repoRoot, file)}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it("names only files and folders of the repository that exist (in code spans)", () => {
    // Written by a run, or a user's own stack: not in the repository.
    const written = (p: string) => /^stacks\/Pulumi\.[\w.-]+\.yaml$/.test(p) || /\/results\/latest[\w.-]*$/.test(p);
    const problems: string[] = [];
    for (const page of pages())
      for (const m of read(page).matchAll(
        /`((?:orchestrator|infra|lib|test|tools|bench|chaos|stacks|docs)\/[\w./-]*)`/g,
      ))
        if (!written(m[1]) && !existsSync(join(repoRoot, m[1].replace(/\/$/, "")))) problems.push(`${page}: ${m[1]}`);
    assert.deepEqual(problems, [], "moved or removed: name the new place");
  });

  it("links every page of docs/ from README.md", () => {
    const linked = new Set(links(read("README.md")).map((t) => t.split("#")[0]));
    const unlinked = readdirSync(join(repoRoot, "docs"))
      .map((f) => `docs/${f}`)
      .filter((p) => !linked.has(p) && !linked.has(`${p}/`));
    assert.deepEqual(unlinked, [], "every page must be findable from the README");
  });

  it("finds a broken link, a broken anchor and a heading's anchor as GitHub makes it", () => {
    // The checks above would pass on an empty guide: the helpers themselves, on known input.
    assert.equal(
      slug("One engine run per replaced node: `molt:rollout.pruneWithNextSurge`"),
      "one-engine-run-per-replaced-node-moltrolloutprunewithnextsurge",
    );
    assert.equal(slug("Step by step: `--max-replacements N`"), "step-by-step---max-replacements-n");
    assert.equal(
      slug("A dead node's teardown (infra/remote/teardown.ts)"),
      "a-dead-nodes-teardown-infraremoteteardownts",
    );
    assert.deepEqual([...anchors("# A\n## B\n```\n# not a heading\n```\n## B\n")], ["a", "b", "b-1"]);
    assert.deepEqual(links("[a](x.md#y) `[b](z.md)`\n```\n[c](w.md)\n```\n[d](https://e)"), ["x.md#y", "https://e"]);
  });
});
