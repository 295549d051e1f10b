// Staging across environments on the lab, in `npm test`: one release verified on staging
// and promoted to prod, a release never verified and a tampered record refused, a soak broken
// by a stopped etcd, bad input. test/long/staging.test.ts adds a second release rolled on both.
import { stagingScenario } from "../support/staging-scenario";

stagingScenario(false);
