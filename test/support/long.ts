// Scenarios `npm test` leaves to `npm run test:long` to keep CI within its budget: they are
// registered only when MOLT_TEST_LONG=1 (set by test/long/from-e2e.test.ts, which loads the
// e2e files again with it). Never a skip at run time: in npm test they do not exist.
export const longRun = process.env.MOLT_TEST_LONG === "1";

/** Registers the tests in `register` only in the long run. */
export function longOnly(register: () => void): void {
  if (longRun) register();
}
