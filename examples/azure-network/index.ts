// The Azure reference network as a stack of its own (see Pulumi.yaml beside this file).
import * as pulumi from "@pulumi/pulumi";
import { AzureReferenceNetwork } from "../../infra/providers/azure/network";

const config = new pulumi.Config();
const clusterName = config.require("clusterName");
const resourceGroupName = config.get("resourceGroupName");
const net = new AzureReferenceNetwork(clusterName, {
  clusterName,
  location: config.require("location"),
  ...(resourceGroupName ? { resourceGroupName } : {}),
  zones: config.getObject<string[]>("zones") ?? [],
  sshSourceCidrs: config.requireObject<string[]>("sshSourceCidrs"),
  bastion: { image: config.require("bastionImage"), user: config.get("bastionUser") ?? "azureuser" },
  sshPublicKey: config.require("sshPublicKey"),
});

/** molt:azure's network keys (add vmSize and osDisk), molt:ssh.bastion, and the endpoint. */
export const moltAzure = net.moltAzure;
export const bastion = net.bastion;
export const controlPlaneEndpoint = pulumi.interpolate`${net.apiAddress}:6443`;
