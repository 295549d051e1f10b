import * as assert from "node:assert/strict";
import { hexMemberId } from "../../orchestrator/etcd-id";

describe("etcd member IDs for humans", () => {
  it("prints the uint64 in hex, as etcdctl does, without losing precision", () => {
    // 0x91bc3c398fb3c146 is above 2^53: a Number would round it.
    assert.equal(hexMemberId("10501334649042878790"), "91bc3c398fb3c146");
    assert.equal(hexMemberId("18446744073709551615"), "ffffffffffffffff");
    assert.equal(hexMemberId("1"), "1");
  });
  it("returns anything else as it is", () => {
    assert.equal(hexMemberId("8e9e05c52164694d"), "8e9e05c52164694d");
    assert.equal(hexMemberId(""), "");
  });
});
