// Staging across environments, the whole way (npm run test:long): as test/e2e/staging.test.ts,
// plus staging rolled from r1 to r2 (3 nodes), promote refused while r2 soaks, molt verify,
// an unattended promote without --yes refused, the promotion written, and prod rolled to r2.
import { stagingScenario } from "../support/staging-scenario";

stagingScenario(true);
