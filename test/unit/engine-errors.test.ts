// The engine's refusals of a backend, as the Automation API reports them, become errors that
// say what the engine said (orchestrator/stack/driver.ts classifyEngineError).
import * as assert from "node:assert/strict";
import { BackendError, classifyEngineError, engineErrorLine } from "../../orchestrator/stack/driver";

/** What the Automation API's CommandError message looks like (code, stdout, stderr). */
const wrapped = (stderr: string) => `code: 1\n stdout: \n stderr: ${stderr}\n\n err?: \n`;

describe("engine errors (orchestrator/stack/driver.ts)", () => {
  const rows: Array<[string, string, RegExp]> = [
    [
      "an azblob URL without an account",
      'error: unable to open bucket "azblob://c": azureblob: Options.AccountName is required',
      /azblob:\/\/c: unable to open bucket "azblob:\/\/c": azureblob: Options\.AccountName is required; nothing/,
    ],
    [
      "a folder that does not exist",
      'error: unable to open state directory "file:///nope": stat /nope: no such file or directory',
      /unable to open state directory "file:\/\/\/nope": stat \/nope: no such file or directory; nothing/,
    ],
  ];
  for (const [what, stderr, message] of rows)
    it(`names what the engine said about ${what}, not its exit code`, () => {
      const backend = stderr.includes("azblob") ? "azblob://c" : "file:///nope";
      const e = classifyEngineError(new Error(wrapped(stderr)), "lab", backend);
      assert.ok(e instanceof BackendError);
      assert.match(e.message, message);
      assert.doesNotMatch(e.message, /code: 1/);
    });

  it("reads the error line at the start of a line too, and falls back to the first line", () => {
    assert.equal(engineErrorLine("warning: x\nerror: it broke\n"), "it broke");
    assert.equal(engineErrorLine("something else\nmore"), "something else");
  });
});
