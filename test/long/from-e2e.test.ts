// The e2e suites again, with the scenarios `npm test` leaves out for CI's time budget
// (test/support/long.ts): kube.test.ts's drain blocked by a PodDisruptionBudget past its
// deadline, rollout.test.ts's SIGKILL during promote-or-verify and remove-member (the chaos
// subset's kill chain covers those boundaries in npm test), controls.test.ts's
// certificate-driven replacement, chaos.test.ts's bootstrap that never starts etcd and old
// member dying mid-rollout, adopt.test.ts's etcd minor upgrade after adoption (3.5.35 -> 3.6).
process.env.MOLT_TEST_LONG = "1";
/* eslint-disable @typescript-eslint/no-require-imports */
require("../e2e/kube.test");
require("../e2e/rollout.test");
require("../e2e/controls.test");
require("../e2e/chaos.test");
require("../e2e/adopt.test");
