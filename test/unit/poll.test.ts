// molt's one way to wait (lib/poll.ts): a condition checked until it holds, bounded by a
// deadline and a cancel, and each check bounded too (a check that never returns ends the wait
// at the deadline and its grace, not never).
import * as assert from "node:assert/strict";
import { DeadlineError, pollUntil } from "../../lib/poll";

const never = () => new Promise<undefined>(() => undefined);

describe("pollUntil (lib/poll.ts)", () => {
  it("returns the first value a check gives, checking again while it gives none", async () => {
    let n = 0;
    const v = await pollUntil(() => (++n === 3 ? "ready" : undefined), { what: "x", deadlineMs: 5_000, intervalMs: 5 });
    assert.equal(v, "ready");
    assert.equal(n, 3);
  });

  it("throws DeadlineError at the deadline, with the last miss's reason", async () => {
    await assert.rejects(
      pollUntil((miss) => miss("still 2 learners"), {
        what: "the learner to catch up",
        deadlineMs: 100,
        intervalMs: 10,
      }),
      (e: Error) =>
        e instanceof DeadlineError &&
        e.message === "the learner to catch up did not happen within 0.1s (still 2 learners)",
    );
  });

  it("a check's own error ends the wait with it", async () => {
    await assert.rejects(
      pollUntil(
        () => {
          throw new Error("permission denied");
        },
        { what: "x", deadlineMs: 5_000 },
      ),
      /permission denied/,
    );
  });

  it("a check that never returns ends the wait at the deadline and its grace (it waited forever)", async () => {
    const t = Date.now();
    let n = 0;
    await assert.rejects(
      pollUntil((miss) => (++n === 1 ? miss("no leader yet") : never()), {
        what: "etcd to answer",
        deadlineMs: 200,
        graceMs: 300,
        intervalMs: 5,
      }),
      (e: Error) =>
        e instanceof DeadlineError &&
        e.message ===
          "etcd to answer did not happen within 0.2s (its last check had not returned 0.3s after that; " +
            "the one before: no leader yet)",
    );
    const ms = Date.now() - t;
    assert.ok(ms >= 480 && ms < 2_000, `after ${ms} ms`);
  });

  it("a check that returns within the grace is taken", async () => {
    const v = await pollUntil(() => new Promise<string>((r) => setTimeout(() => r("late but whole"), 150)), {
      what: "x",
      deadlineMs: 50,
      graceMs: 1_000,
    });
    assert.equal(v, "late but whole");
  });

  it("a cancel lets the check under way finish, and what it saw counts", async () => {
    // The VIP hand-off's wait: a cancel during the check that sees the hand-off done must not
    // throw that away (keepalived would be restarted on the retiring node).
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    const v = await pollUntil(() => new Promise<string>((r) => setTimeout(() => r("handed off"), 200)), {
      what: "the VIP to move",
      deadlineMs: 60_000,
      signal: ac.signal,
      graceMs: 5_000,
    });
    assert.equal(v, "handed off");
    // A check that finds nothing: the cancel ends the wait after it, not at the deadline.
    const t = Date.now();
    await assert.rejects(
      pollUntil(() => new Promise<undefined>((r) => setTimeout(() => r(undefined), 100)), {
        what: "the VIP to move",
        deadlineMs: 60_000,
        signal: AbortSignal.abort(),
      }),
      (e: Error) => e.name === "AbortError" && e.message === "cancelled while waiting for the VIP to move",
    );
    const ms = Date.now() - t;
    assert.ok(ms >= 90 && ms < 1_000, `after the check under way (100 ms), not before: ${ms} ms`);
  });

  it("a cancel during the pause between checks starts no new check", async () => {
    const ac = new AbortController();
    let checks = 0;
    const waiting = pollUntil(
      () => {
        checks++;
        return undefined;
      },
      { what: "x", deadlineMs: 60_000, intervalMs: 200, maxIntervalMs: 200, signal: ac.signal },
    );
    await new Promise((r) => setTimeout(r, 50)); // the first check is done, the pause under way
    ac.abort();
    await assert.rejects(waiting, (e: Error) => e.name === "AbortError");
    assert.equal(checks, 1);
  });

  it("a cancel in the middle of a check that hangs ends the wait after the grace", async () => {
    const ac = new AbortController();
    const t = Date.now();
    setTimeout(() => ac.abort(), 100);
    await assert.rejects(
      pollUntil(never, { what: "the node to join", deadlineMs: 60_000, signal: ac.signal, graceMs: 200 }),
      (e: Error) => e.name === "AbortError" && e.message === "cancelled while waiting for the node to join",
    );
    const ms = Date.now() - t;
    assert.ok(ms >= 280 && ms < 1_500, `after ${ms} ms`);
  });
});
