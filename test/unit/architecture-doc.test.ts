// docs/architecture.md held against the code: the files it names exist, and each of the
// three questions ("where do I add ...") names files that hold every name it gives.
import * as assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = join(__dirname, "..", "..", "..");
const doc = readFileSync(join(root, "docs", "architecture.md"), "utf8");
const TOP = /^(orchestrator|infra|lib|test|docs|stacks|bench|chaos|tools)\//;

/** A path as the doc writes it, made concrete: `<kind>` is any provider, aws for the check. */
const concrete = (p: string) => p.replace("<kind>", "aws");
const ticked = (text: string) => [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]);

function threeQuestions(): { question: string; text: string }[] {
  const start = doc.indexOf("### Three questions, one path each");
  const end = doc.indexOf("\n### ", start + 1);
  assert.ok(start >= 0 && end > start, "docs/architecture.md has its three questions");
  return doc
    .slice(start, end)
    .split(/\n- /)
    .slice(1)
    .map((b) => ({ question: /\*\*(.+?)\*\*/.exec(b)?.[1] ?? "", text: b }));
}

describe("docs/architecture.md against the code", () => {
  it("names only files and folders that exist", () => {
    const missing = [...new Set(ticked(doc).filter((t) => TOP.test(t) && !t.includes("*")))].filter(
      (p) => !existsSync(join(root, concrete(p))),
    );
    assert.deepEqual(missing, []);
  });

  it("answers the three questions, each with names its files hold", () => {
    const qs = threeQuestions();
    assert.deepEqual(
      qs.map((q) => q.question),
      [
        "Where do I add a provider?",
        "Where do I add a gate before a learner's promotion?",
        "Where do I add a drain policy?",
      ],
    );
    for (const q of qs) {
      const files = ticked(q.text).filter((t) => TOP.test(t) && t.endsWith(".ts"));
      const source = files.map((f) => readFileSync(join(root, concrete(f)), "utf8")).join("\n");
      const names = ticked(q.text).filter((t) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(t));
      assert.ok(names.length > 0, q.question);
      const unknown = names.filter((n) => !new RegExp(`\\b${n}\\b`).test(source));
      assert.deepEqual(unknown, [], `${q.question}: names none of its files (${files.join(", ")}) holds`);
    }
  });
});
