// The lab's bootstrap scripts as they are sent to a machine: one script per step that
// picks the Kubernetes (kubeadm) or the etcd-only path from the image, checked by
// shellcheck like the cloud scripts.
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { labScript } from "../../infra/lab/node";

describe("lab bootstrap scripts (infra/lab/scripts)", () => {
  for (const step of ["init", "join", "reset"] as const) {
    it(`${step}: chooses kubeadm or etcd-only by the image, and passes shellcheck`, () => {
      const script = labScript(step);
      assert.match(script, /^if \[ -x \/usr\/local\/bin\/kubeadm \]; then$/m);
      if (step === "init") assert.match(script, /kubeadm init --config/);
      if (step === "join") {
        assert.match(script, /kubeadm join --config/);
        assert.match(
          script,
          /join bundle names a file outside \/etc\/kubernetes\/pki/,
          "the join refuses files outside the PKI directory",
        );
      }
      assert.ok(!/--token[ =]/.test(script), "no bootstrap token on a command line (it would show in ps)");
      const dir = mkdtempSync(join(tmpdir(), "molt-lab-script-"));
      try {
        const f = join(dir, `${step}.sh`);
        writeFileSync(f, `#!/bin/bash\nset -euo pipefail\n${script}`);
        execFileSync("shellcheck", ["-S", "warning", f], { encoding: "utf8" });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
