// What adoption says when hosts cannot be reached: every host by name, the bastion's own
// failure once, and a host the bastion could not connect to as that host's failure.
import * as assert from "node:assert/strict";
import { reachProblems, type ReachFailure } from "../../../orchestrator/adopt/reach";
import {
  BastionError,
  forwardError,
  HostKeyMismatchError,
  UnreachableThroughBastionError,
} from "../../../infra/remote/ssh";

const B = "root@203.0.113.7:22";
/** ssh2's error for a refused direct-tcpip channel: RFC 4254's reason code and sshd's description. */
const channelFailure = (reason: number, description: string) =>
  Object.assign(new Error(`(SSH) Channel open failure: ${description}`), { reason });

describe("adoption: hosts that cannot be reached (orchestrator/adopt/reach.ts)", () => {
  it("a host whose SSH port the bastion could not connect to is that host's failure, not the bastion's", () => {
    const e = forwardError(B, "10.0.0.12", 22, channelFailure(2, "Connection refused"));
    assert.ok(e instanceof UnreachableThroughBastionError);
    assert.equal(e.message, `bastion ${B} could not connect to 10.0.0.12:22 (Connection refused)`);
  });

  it("a bastion that may not forward (AllowTcpForwarding, PermitOpen) is the bastion's failure", () => {
    const e = forwardError(B, "10.0.0.12", 22, channelFailure(1, "administratively prohibited: open failed"));
    assert.ok(e instanceof BastionError);
    assert.match(e.message, /refused to open a connection to 10\.0\.0\.12:22/);
  });

  it("names every unreachable host, in order, and none as 'the bastion refused'", () => {
    const failures: ReachFailure[] = ["10.0.0.13", "10.0.0.11", "10.0.0.12"].map((host) => ({
      host,
      port: 22,
      doing: "is not reachable over SSH",
      error: forwardError(B, host, 22, channelFailure(2, "Connection refused")),
    }));
    const problems = reachProblems(failures);
    const refused = (host: string) =>
      `host ${host}:22 is not reachable over SSH: bastion ${B} could not connect to ${host}:22 (Connection refused)`;
    assert.deepEqual(problems, [refused("10.0.0.11"), refused("10.0.0.12"), refused("10.0.0.13")]);
  });

  it("says the bastion's own failure once, and still names a host that failed on its own", () => {
    const refused = new BastionError(B, "All configured authentication methods failed");
    const problems = reachProblems([
      { host: "10.0.0.11", port: 22, doing: "cannot log in as root", error: refused },
      { host: "10.0.0.12", port: 22, doing: "cannot log in as root", error: refused },
      {
        host: "10.0.0.13",
        port: 2222,
        doing: "cannot log in as root",
        error: new Error("All configured authentication methods failed"),
      },
    ]);
    assert.deepEqual(problems, [
      `the bastion refused: bastion ${B}: All configured authentication methods failed`,
      "host 10.0.0.13:2222 cannot log in as root: All configured authentication methods failed",
    ]);
  });

  it("says a bastion with another host key once", () => {
    const wrong = new HostKeyMismatchError("203.0.113.7", "bastion ");
    const problems = reachProblems(
      ["10.0.0.11", "10.0.0.12"].map((host) => ({ host, port: 22, doing: "is not reachable over SSH", error: wrong })),
    );
    assert.equal(problems.length, 1);
    assert.match(problems[0], /^the bastion's host key is not molt:ssh\.bastion\.hostKey: /);
  });
});
