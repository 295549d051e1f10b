// Where a node stands before kubeadm runs, and the reset of a half-done attempt: only
// kubeadm's own files count, and a static pod the template brings (kube-vip, a node agent)
// survives the reset. Run in bash against a throwaway root (the paths are rewritten).
import * as assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NODE_STATE_FUNCTION, RESET_KEEPING_FOREIGN_MANIFESTS } from "../../../infra/kubeadm/state";
import { bash, shellcheck } from "./shell";

describe("kubeadm node state (infra/kubeadm/state.ts)", () => {
  let root: string;
  const rooted = (fn: string) =>
    fn.replaceAll("/etc/kubernetes", `${root}/etc/kubernetes`).replaceAll("/var/lib/etcd", `${root}/var/lib/etcd`);
  const manifests = () => join(root, "etc/kubernetes/manifests");
  const state = () => bash(`${rooted(NODE_STATE_FUNCTION)}\nnode_state`).stdout.trim();

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "molt-state-"));
    mkdirSync(manifests(), { recursive: true });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("a template's kube-vip static pod is not partial state; kubeadm's manifests are", () => {
    writeFileSync(join(manifests(), "kube-vip.yaml"), "kind: Pod\n");
    assert.equal(state(), "clean");
    writeFileSync(join(manifests(), "etcd.yaml"), "kind: Pod\n");
    assert.equal(state(), "partial");
    writeFileSync(join(manifests(), "kube-apiserver.yaml"), "kind: Pod\n");
    writeFileSync(join(root, "etc/kubernetes/kubelet.conf"), "");
    assert.equal(state(), "complete");
  });

  it("the reset of a partial state keeps the image's static pods and removes kubeadm's", () => {
    writeFileSync(join(manifests(), "kube-vip.yaml"), "kind: Pod\nmetadata: {name: kube-vip}\n");
    writeFileSync(join(manifests(), "kube-apiserver.yaml"), "kind: Pod\n");
    mkdirSync(join(root, "var/lib/etcd/member"), { recursive: true });
    // kubeadm reset empties the manifests directory, as the real one does.
    const fakeKubeadm = [
      `kubeadm() { rm -rf "${root}/etc/kubernetes/manifests"/*; }`,
      'log() { echo "$*" >&2; }',
      "CRI_SOCKET=unix:///run/containerd.sock",
    ].join("\n");
    const r = bash(`${fakeKubeadm}\n${rooted(RESET_KEEPING_FOREIGN_MANIFESTS)}\nreset_partial_state`);
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(join(manifests(), "kube-vip.yaml")), "the template's static pod is back");
    assert.ok(!existsSync(join(manifests(), "kube-apiserver.yaml")), "kubeadm's manifest is gone");
    assert.ok(!existsSync(join(root, "var/lib/etcd")), "etcd data wiped");
    assert.match(r.stderr, /keeping the image's static pod kube-vip\.yaml/);
  });

  it("both functions pass shellcheck", () => {
    const text = [
      "#!/usr/bin/env bash",
      "log() { :; }",
      "CRI_SOCKET=x",
      NODE_STATE_FUNCTION,
      RESET_KEEPING_FOREIGN_MANIFESTS,
      "node_state",
      "reset_partial_state",
      "",
    ].join("\n");
    assert.equal(shellcheck(text), "");
  });
});
