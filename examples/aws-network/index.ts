// The AWS reference network as a stack of its own (see Pulumi.yaml beside this file).
import * as pulumi from "@pulumi/pulumi";
import { AwsReferenceNetwork } from "../../infra/providers/aws/network";

const config = new pulumi.Config();
const clusterName = config.require("clusterName");
const net = new AwsReferenceNetwork(clusterName, {
  clusterName,
  zones: config.requireObject<string[]>("zones"),
  sshSourceCidrs: config.requireObject<string[]>("sshSourceCidrs"),
  bastion: { ami: config.require("bastionAmi"), user: config.get("bastionUser") ?? "ubuntu" },
  sshPublicKey: config.require("sshPublicKey"),
});

/** molt:aws's network keys (add instanceType and rootVolume), molt:ssh.bastion, and the endpoint. */
export const moltAws = net.moltAws;
export const bastion = net.bastion;
export const controlPlaneEndpoint = pulumi.interpolate`${net.apiDnsName}:6443`;
