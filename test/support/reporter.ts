// mocha's spec reporter plus one plain closing line, "N passed, N failed, N skipped",
// which CI reads as the run's verdict.
import * as Mocha from "mocha";

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner: Mocha.Runner, options?: Mocha.MochaOptions) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const s = this.stats;
      process.stdout.write(`\n${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}

export = SpecWithSummary;
