// A reference network for a molt cluster on an empty Azure subscription, laid out the way
// KubeOne's examples/terraform/azure lays out its own (resource group, VNet and subnet,
// a network security group, a load balancer "kubernetes" with backend pool "ApiServers" and
// a 6443 rule), made private: an internal Standard load balancer probing HTTPS /readyz, a
// NAT gateway for the nodes' outbound traffic (packages, images; a Standard internal LB
// gives its backends none), and a bastion in a subnet of its own that molt's SSH goes
// through. Its `moltAzure` output is the network part of a molt:azure section;
// examples/azure-network runs it as a stack of its own.
import * as pulumi from "@pulumi/pulumi";
import { renderCloudInit } from "../cloud-common";
import { SshKeyPair } from "../../remote/keypair";
import { azureSdk } from "../sdk";
import { imageReference } from "./config";

export interface AzureReferenceNetworkArgs {
  /** The cluster's name: resource names and the molt.io/cluster tag. */
  clusterName: string;
  /** The Azure region, such as westeurope. */
  location: string;
  /** An existing resource group to put everything in; without it, `<clusterName>-rg` is made. */
  resourceGroupName?: string;
  /** The VNet's range (default 10.0.0.0/16): the control plane gets the first /20, the bastion .240.0/24. */
  vnetCidr?: string;
  /** Zones of the region the nodes spread over ("1", "2", "3"); the API frontend is zone-redundant over them. */
  zones?: string[];
  /** Where SSH to the bastion is allowed from (the machine that runs molt; your VPN). */
  sshSourceCidrs: string[];
  /** The bastion's image (Publisher:Offer:Sku:Version, pinned) and login user. */
  bastion: { image: string; user: string; vmSize?: string };
  /** The SSH public key that may log in to the bastion (the public half of molt:ssh.privateKey). */
  sshPublicKey: pulumi.Input<string>;
  tags?: Record<string, string>;
}

/** The subnets of a /16 VNet: the control plane's /20 from .0, the bastion's /24 at .240. */
export function vnetPlan(vnetCidr: string): { controlPlane: string; bastion: string } {
  const m = /^(\d+)\.(\d+)\.0\.0\/16$/.exec(vnetCidr);
  if (!m || Number(m[1]) > 255 || Number(m[2]) > 255)
    throw new Error(`vnetCidr ${JSON.stringify(vnetCidr)}: give a /16 such as 10.0.0.0/16`);
  return { controlPlane: `${m[1]}.${m[2]}.0.0/20`, bastion: `${m[1]}.${m[2]}.240.0/24` };
}

/** What is wrong with the arguments (empty when nothing). */
export function azureNetworkProblems(args: AzureReferenceNetworkArgs): string[] {
  const problems: string[] = [];
  if (!/^[a-z0-9][a-z0-9-]{0,38}[a-z0-9]$/.test(args.clusterName))
    problems.push(
      `clusterName ${JSON.stringify(args.clusterName)}: 2 to 40 lower-case letters, digits and dashes ` +
        "(it names Azure resources)",
    );
  if (!/^[a-z0-9]+$/.test(args.location))
    problems.push(`location ${JSON.stringify(args.location)}: an Azure region name such as westeurope`);
  for (const z of args.zones ?? [])
    if (!/^[1-3]$/.test(z)) problems.push(`zones: ${JSON.stringify(z)} is not an Azure zone ("1", "2" or "3")`);
  if (args.sshSourceCidrs.length === 0)
    problems.push(
      "sshSourceCidrs: give at least one range SSH to the bastion may come from (not 0.0.0.0/0 unless meant)",
    );
  for (const c of args.sshSourceCidrs)
    if (!/^\d+\.\d+\.\d+\.\d+\/\d+$/.test(c)) problems.push(`sshSourceCidrs: ${JSON.stringify(c)} is not an IPv4 CIDR`);
  try {
    imageReference(args.bastion.image);
  } catch (e) {
    problems.push(`bastion.${(e as Error).message}`);
  }
  try {
    vnetPlan(args.vnetCidr ?? "10.0.0.0/16");
  } catch (e) {
    problems.push((e as Error).message);
  }
  return problems;
}

/** The network part of a molt:azure section. */
export interface MoltAzureNetworkSection {
  resourceGroupName: string;
  location: string;
  subnetId: string;
  apiBackendPoolId: string;
  zones?: string[];
}

export class AzureReferenceNetwork extends pulumi.ComponentResource {
  readonly resourceGroupName: pulumi.Output<string>;
  readonly vnetId: pulumi.Output<string>;
  readonly subnetId: pulumi.Output<string>;
  /** The API frontend's private address: molt:bootstrap.controlPlaneEndpoint (with :6443) and a certificate SAN. */
  readonly apiAddress: pulumi.Output<string>;
  readonly apiBackendPoolId: pulumi.Output<string>;
  readonly networkSecurityGroupId: pulumi.Output<string>;
  /** molt:ssh.bastion: the bastion's public address, user and pinned host key. */
  readonly bastion: pulumi.Output<{ host: string; port: number; user: string; hostKey: string }>;
  /** A molt:azure section for the cluster's stack (vmSize and osDisk are the user's). */
  readonly moltAzure: pulumi.Output<MoltAzureNetworkSection>;

  constructor(name: string, args: AzureReferenceNetworkArgs, opts?: pulumi.ComponentResourceOptions) {
    super("molt:azure:ReferenceNetwork", name, {}, opts);
    const problems = azureNetworkProblems(args);
    if (problems.length) throw new Error(`AzureReferenceNetwork ${name}: ${problems.join("; ")}`);
    const az = azureSdk();
    const cidr = args.vnetCidr ?? "10.0.0.0/16";
    const plan = vnetPlan(cidr);
    const zones = args.zones ?? [];
    const tags = { ...args.tags, "molt.io/cluster": args.clusterName };
    const p = { parent: this };
    const location = args.location;
    const n = (what: string) => `${args.clusterName}-${what}`;

    const resourceGroupName: pulumi.Output<string> = args.resourceGroupName
      ? pulumi.output(args.resourceGroupName)
      : new az.resources.ResourceGroup(`${name}-rg`, { resourceGroupName: n("rg"), location, tags }, p).name;
    const common = { resourceGroupName, location, tags };

    // Outbound for the nodes: a Standard internal load balancer gives its backends none.
    const natIp = new az.network.PublicIPAddress(
      `${name}-nat`,
      {
        ...common,
        publicIpAddressName: n("nat"),
        sku: { name: "Standard" },
        publicIPAllocationMethod: "Static",
        ...(zones.length ? { zones } : {}),
      },
      p,
    );
    const nat = new az.network.NatGateway(
      `${name}-nat`,
      { ...common, natGatewayName: n("nat"), sku: { name: "Standard" }, publicIpAddresses: [{ id: natIp.id }] },
      p,
    );

    const rule = (
      priority: number,
      ruleName: string,
      source: string | string[],
      ports: string,
      description: string,
      access = "Allow",
    ) => ({
      name: ruleName,
      priority,
      direction: "Inbound",
      access,
      protocol: ports === "*" ? "*" : "Tcp",
      sourcePortRange: "*",
      ...(Array.isArray(source) ? { sourceAddressPrefixes: source } : { sourceAddressPrefix: source }),
      destinationAddressPrefix: "*",
      destinationPortRange: ports,
      description,
    });
    // The control plane's rules; the named ones are kept beside the all-traffic rule between
    // the nodes (CNI) so that what the control plane needs stays readable.
    const nsg = new az.network.NetworkSecurityGroup(
      `${name}-control-plane`,
      {
        ...common,
        networkSecurityGroupName: n("control-plane"),
        securityRules: [
          rule(100, "etcd", plan.controlPlane, "2379-2380", "etcd between control-plane nodes"),
          rule(110, "kubelet", plan.controlPlane, "10250", "kubelet between control-plane nodes"),
          rule(120, "nodes", plan.controlPlane, "*", "all traffic between control-plane nodes (controllers, CNI)"),
          rule(200, "api-lb-probe", "AzureLoadBalancer", "6443", "Kubernetes API: the load balancer's /readyz probe"),
          rule(
            210,
            "api",
            "VirtualNetwork",
            "6443",
            "Kubernetes API from the VNet (through the internal load balancer)",
          ),
          rule(300, "ssh", plan.bastion, "22", "SSH (molt) from the bastion's subnet"),
          rule(4000, "deny-vnet", "VirtualNetwork", "*", "nothing else from the VNet", "Deny"),
        ],
      },
      p,
    );
    const bastionNsg = new az.network.NetworkSecurityGroup(
      `${name}-bastion`,
      {
        ...common,
        networkSecurityGroupName: n("bastion"),
        securityRules: [rule(100, "ssh", args.sshSourceCidrs, "22", "SSH to the bastion")],
      },
      p,
    );

    const vnet = new az.network.VirtualNetwork(
      `${name}-vnet`,
      { ...common, virtualNetworkName: n("vnet"), addressSpace: { addressPrefixes: [cidr] } },
      // Subnets are resources of their own: a VNet update must not remove them.
      { parent: this, ignoreChanges: ["subnets"] },
    );
    const subnet = new az.network.Subnet(
      `${name}-control-plane`,
      {
        resourceGroupName,
        virtualNetworkName: vnet.name,
        subnetName: n("control-plane"),
        addressPrefix: plan.controlPlane,
        networkSecurityGroup: { id: nsg.id },
        natGateway: { id: nat.id },
        defaultOutboundAccess: false,
      },
      p,
    );
    const bastionSubnet = new az.network.Subnet(
      `${name}-bastion`,
      {
        resourceGroupName,
        virtualNetworkName: vnet.name,
        subnetName: n("bastion"),
        addressPrefix: plan.bastion,
        networkSecurityGroup: { id: bastionNsg.id },
      },
      // Azure updates one subnet of a VNet at a time.
      { parent: this, dependsOn: [subnet] },
    );

    // The API: KubeOne's load balancer "kubernetes" (pool ApiServers, rule on 6443), internal
    // and Standard, probing HTTPS /readyz so a node whose API server is not ready gets no traffic.
    const lbName = "kubernetes";
    const subscription = az.authorization.getClientConfigOutput(p).subscriptionId;
    const lbId = pulumi.interpolate`/subscriptions/${subscription}/resourceGroups/${resourceGroupName}`.apply(
      (rg) => `${rg}/providers/Microsoft.Network/loadBalancers/${lbName}`,
    );
    const lbPart = (kind: string, part: string) => lbId.apply((id) => `${id}/${kind}/${part}`);
    const lb = new az.network.LoadBalancer(
      `${name}-api`,
      {
        ...common,
        loadBalancerName: lbName,
        sku: { name: "Standard", tier: "Regional" },
        frontendIPConfigurations: [
          {
            name: "KubeApi",
            subnet: { id: subnet.id },
            privateIPAllocationMethod: "Dynamic",
            ...(zones.length ? { zones } : {}),
          },
        ],
        backendAddressPools: [{ name: "ApiServers" }],
        probes: [
          {
            name: "readyz",
            protocol: "Https",
            port: 6443,
            requestPath: "/readyz",
            intervalInSeconds: 5,
            numberOfProbes: 2,
            probeThreshold: 2,
          },
        ],
        loadBalancingRules: [
          {
            name: "KubeApi",
            protocol: "Tcp",
            frontendPort: 6443,
            backendPort: 6443,
            enableFloatingIP: false,
            idleTimeoutInMinutes: 5,
            disableOutboundSnat: true,
            frontendIPConfiguration: { id: lbPart("frontendIPConfigurations", "KubeApi") },
            backendAddressPool: { id: lbPart("backendAddressPools", "ApiServers") },
            probe: { id: lbPart("probes", "readyz") },
          },
        ],
      },
      p,
    );

    // The bastion: the only machine with a public address; its host key is made here and
    // installed by cloud-init, so molt pins it from the first connection.
    const hostKey = new SshKeyPair(`${name}-bastion-hostkey`, { comment: `host key of ${n("bastion")}` }, p);
    const bastionIp = new az.network.PublicIPAddress(
      `${name}-bastion`,
      {
        ...common,
        publicIpAddressName: n("bastion"),
        sku: { name: "Standard" },
        publicIPAllocationMethod: "Static",
      },
      p,
    );
    const bastionNic = new az.network.NetworkInterface(
      `${name}-bastion`,
      {
        ...common,
        networkInterfaceName: n("bastion"),
        ipConfigurations: [
          {
            name: "primary",
            primary: true,
            privateIPAllocationMethod: "Dynamic",
            subnet: { id: bastionSubnet.id },
            publicIPAddress: { id: bastionIp.id },
          },
        ],
      },
      p,
    );
    const bastionVm = new az.compute.VirtualMachine(
      `${name}-bastion`,
      {
        ...common,
        vmName: n("bastion"),
        hardwareProfile: { vmSize: args.bastion.vmSize ?? "Standard_B1s" },
        storageProfile: {
          imageReference: imageReference(args.bastion.image),
          osDisk: {
            name: n("bastion-os"),
            createOption: "FromImage",
            deleteOption: "Delete",
            managedDisk: { storageAccountType: "StandardSSD_LRS" },
          },
        },
        osProfile: {
          computerName: n("bastion"),
          adminUsername: args.bastion.user,
          customData: pulumi.secret(
            pulumi
              .all([args.sshPublicKey, hostKey.privateKey, hostKey.publicKey])
              .apply(([authorizedKey, privateKey, publicKey]) =>
                Buffer.from(
                  renderCloudInit({
                    hostname: n("bastion"),
                    user: args.bastion.user,
                    authorizedKey,
                    hostKey: { privateKey, publicKey },
                  }),
                ).toString("base64"),
              ),
          ),
          linuxConfiguration: {
            disablePasswordAuthentication: true,
            ssh: {
              publicKeys: [{ path: `/home/${args.bastion.user}/.ssh/authorized_keys`, keyData: args.sshPublicKey }],
            },
          },
        },
        networkProfile: { networkInterfaces: [{ id: bastionNic.id, primary: true, deleteOption: "Delete" }] },
      },
      // The OS profile (custom data with the host key) is the first boot's; a change would replace the VM.
      { parent: this, ignoreChanges: ["osProfile"] },
    );

    this.resourceGroupName = resourceGroupName;
    this.vnetId = vnet.id;
    this.subnetId = subnet.id;
    this.networkSecurityGroupId = nsg.id;
    this.apiAddress = lb.frontendIPConfigurations.apply((f) => {
      const ip = f?.[0]?.privateIPAddress;
      if (!ip) throw new Error(`load balancer ${lbName} has no private frontend address`);
      return ip;
    });
    this.apiBackendPoolId = pulumi
      .all([lb.id, lb.backendAddressPools])
      .apply(
        ([id, pools]) => pools?.find((x) => x.name === "ApiServers")?.id ?? `${id}/backendAddressPools/ApiServers`,
      );
    this.bastion = pulumi.all([bastionIp.ipAddress, hostKey.publicKey, bastionVm.id]).apply(([host, key]) => {
      if (!host) throw new Error(`public IP ${n("bastion")} has no address`);
      return { host, port: 22, user: args.bastion.user, hostKey: key };
    });
    this.moltAzure = pulumi
      .all([resourceGroupName, subnet.id, this.apiBackendPoolId])
      .apply(([rg, subnetId, pool]): MoltAzureNetworkSection => ({
        resourceGroupName: rg,
        location,
        subnetId,
        apiBackendPoolId: pool,
        ...(zones.length ? { zones } : {}),
      }));
    this.registerOutputs({
      resourceGroupName: this.resourceGroupName,
      vnetId: this.vnetId,
      subnetId: this.subnetId,
      apiAddress: this.apiAddress,
      apiBackendPoolId: this.apiBackendPoolId,
      networkSecurityGroupId: this.networkSecurityGroupId,
      bastion: this.bastion,
      moltAzure: this.moltAzure,
    });
  }
}
