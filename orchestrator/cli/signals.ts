// SIGINT/SIGTERM during a run: stop at a boundary, then harder on a second and third signal.
import { stopEnginesNow } from "../stack/driver";
import { EXIT } from "./exit";
import { ts } from "./render";

/**
 * SIGINT/SIGTERM during a rollout. The first stops the run at the next boundary between
 * operations: an engine step in flight gets the engine's own graceful cancel and finishes.
 * The second terminates the engine now; the third exits at once. Listeners stay installed
 * for the whole run (with none left, Node's default, or the engine runner's signal-exit,
 * would kill molt mid-step). Returns the function that removes them.
 */
export function cancelOnSignals(ac: AbortController, json: boolean): () => void {
  // Human output goes to stdout with the events; with --json, stdout stays one event per line.
  const say = (s: string) => (json ? process.stderr.write(`molt: ${s}\n`) : process.stdout.write(`${ts()}  ${s}\n`));
  let received = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    received++;
    if (received === 1) {
      ac.abort();
      return void say(
        `${sig}: stopping at the next boundary between operations; an engine step in flight finishes first ` +
          `(send ${sig} again to stop the engine now)`,
      );
    }
    if (received === 2) {
      const stopped = stopEnginesNow();
      const engines = stopped.map((p) => `pid ${p.pid}: pulumi ${p.command.slice(0, 60)}`).join("; ");
      return void say(
        stopped.length
          ? `${sig} again: terminating the engine now (${engines}). ` +
              `A step it was running may be left half done (a machine made but not joined, or not yet destroyed) ` +
              `and pending in the state; the next \`molt rollout\` clears that and converges. ` +
              `Send ${sig} once more to exit at once.`
          : `${sig} again: no engine step is running; stopping at the next boundary. ` +
              `Send ${sig} once more to exit at once.`,
      );
    }
    say(
      `${sig} a third time: exiting now. The run's lock is taken over by the next run (its process is gone); ` +
        `an etcd or Kubernetes call in flight may not have finished: run \`molt status\`, then \`molt rollout\`.`,
    );
    process.exit(EXIT.cancelled);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return () => {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  };
}
