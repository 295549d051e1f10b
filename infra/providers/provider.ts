// What a provider is to molt: one definition per provider (infra/providers/<kind>), listed
// in infra/providers/registry.ts. orchestrator/config/index.ts validates a stack's config with
// it, orchestrator/config/program-input.ts and infra/program.ts build the stack program from it,
// orchestrator/stack/plugins.ts checks its engine plugins, and orchestrator/stack/targets.ts
// targets its cluster-wide components. Adding a provider is a new definition, its
// component, its tests and docs, and one line in the registry.
import type { HostFileCarry } from "../../orchestrator/core/model";
import type * as pulumi from "@pulumi/pulumi";
import type { SshAccessSettings } from "../../orchestrator/core/nodes";
import type { z } from "zod";
import type { KubeadmBootstrapSettings } from "../kubeadm/settings";
import type { NodeEntry } from "../../orchestrator/core/nodes";
import type { CloudControlPlaneNode, CloudNodeArgs } from "./cloud-node";
import type { EndpointCheck, LoadBalancerFacts } from "./api-load-balancer";

/** A Pulumi resource plugin the engine must have before any `up` of a stack of this provider. */
export interface PluginRequirement {
  kind: "resource";
  name: string;
  /** Exactly the version the SDK (or molt's own binding) asks the engine for. */
  version: string;
}

/** A zod schema for each `molt:<key>` section a provider owns. */
export type Sections = Record<`molt:${string}`, z.ZodType>;

interface DefinitionBase<K extends string> {
  kind: K;
  /** Its own `molt:` sections; checked when the stack's molt:provider is this provider. */
  sections: Sections;
  plugins: readonly PluginRequirement[];
  /**
   * Types of its cluster-wide components (resources that belong to no node live in them):
   * every targeted `up` includes them and their children, so one added to an existing
   * stack (or first needed with a second node) is created by the next surge.
   */
  clusterWideTypes: readonly string[];
  /**
   * What is wrong with a machine id given to `molt adopt --import` (the message after
   * "--import HOST=ID: "), or undefined when it has the provider's shape.
   */
  importIdProblem(id: string): string | undefined;
}

/** The lab: molt's embedded cloud on this host (infra/providers/lab.ts). */
export interface LabProviderDefinition<Settings, Input> extends DefinitionBase<"lab"> {
  family: "lab";
  /** Problems across keys the schema cannot see, on raw values. */
  problems(raw: Record<string, unknown>, stack: string): string[];
  /** The typed settings from the parsed sections (StackConfig.lab). */
  settings(sections: Record<string, unknown>, stack: string): Settings;
  program(input: Input): Record<string, unknown>;
}

/** What every cloud stack has beside its provider's own settings (StackConfig.cloud). */
export interface CloudConfigBase {
  /**
   * The login user cloud-init creates (not root). The private key is the secret
   * molt:ssh.privateKey, read by the program.
   */
  ssh: { user: string; port?: number };
  /** Where new nodes may go (molt:failureDomains); a node's domain is chosen once, when its entry is made. */
  failureDomains: string[];
  bootstrap: KubeadmBootstrapSettings;
}

/** The failure domains a provider's settings define. */
export interface DomainSource {
  known: string[];
  /** The key that lists them, for messages ("molt:aws.subnetIdsByZone"). */
  where: string;
  /** A node may go without a domain: there is a single placement (or none) to put it in. */
  unplacedAllowed: boolean;
}

/** The program input of a cloud stack (orchestrator/config/program-input.ts makes it). */
export interface CloudProgramInput<
  C extends CloudConfigBase & { provider: string } = CloudConfigBase & { provider: string },
> {
  provider: C["provider"];
  nodes: NodeEntry[];
  cloud: C;
  /** molt:ssh.agent and molt:ssh.bastion, for every connection the program makes. */
  sshAccess?: SshAccessSettings;
  /** The nodes this update may create (infra/node.ts joinsInThisUpdate); absent: any. */
  joining?: string[];
  /** The cluster's host files for the nodes that join, and the node they are copied from. */
  hostFiles?: HostFileCarry;
  /**
   * `molt adopt` only: check that the provider's API load balancer serves this endpoint
   * (infra/providers/api-load-balancer.ts); the program fails when it does not.
   */
  endpointCheck?: EndpointCheck;
}

/**
 * A cloud provider. `sections` parse the raw config; `domains` and `config` get the
 * sections exactly as that schema parsed them (each definition casts once, to its own type).
 */
export interface CloudProviderDefinition<
  C extends CloudConfigBase & { provider: string },
  Shared = undefined,
> extends DefinitionBase<C["provider"]> {
  family: "cloud";
  /** What is wrong with molt:image on this provider (the message after the key), or undefined. */
  imageProblem(image: string): string | undefined;
  domains(sections: Record<string, unknown>): DomainSource;
  config(sections: Record<string, unknown>, common: CloudConfigBase): C;
  /** Problems across its settings the schema cannot see (each "<key>: <message>"). */
  problems?(cloud: C): string[];
  /** Cluster-wide resources the nodes need (made before them, e.g. Azure's availability set). */
  shared?(cloud: C): Shared;
  /** One node's component. */
  node(entry: NodeEntry, args: CloudNodeArgs, cloud: C, shared: Shared): CloudControlPlaneNode;
  /** Cluster-wide resources over all nodes (vSphere's anti-affinity rule), made after them. */
  cluster?(cloud: C, nodes: readonly CloudControlPlaneNode[]): void;
  /**
   * An adopted node's machine taken into the stack by the engine's import (`molt adopt
   * --import`): the provider's own resource for it, declared with `importOptions(id)` so the
   * engine reads it instead of creating it and never changes it; deleted when the node retires.
   */
  importMachine(name: string, id: string, cloud: C): pulumi.CustomResource;
  /**
   * An adopted node's place in the API load balancer, declared as `<node>-api` when the node
   * is recorded (it is already there: declaring it changes nothing), so that the update that
   * drops the node takes it out, as it does a molt node's attachment. Undefined when the
   * node's machine is unknown (adopted before molt recorded it). `machine`: its imported machine.
   */
  adoptedAttachment?(entry: NodeEntry, cloud: C, machine?: pulumi.Resource): pulumi.Resource | undefined;
  /** What the update that drops an adopted node does to it in the load balancer, for reports. */
  adoptedRelease?(entry: NodeEntry, cloud: C): string;
  /** The API load balancer as the cloud describes it (invokes), for adoption's endpoint check. */
  apiLoadBalancer?(cloud: C, adopted: readonly NodeEntry[]): pulumi.Output<LoadBalancerFacts>;
}

/**
 * A cloud provider as the registry holds it: what takes its own settings type takes the
 * common shape here and checks the kind (infra/providers/cloud-program.ts cloudProvider).
 */
export interface RegisteredCloudProvider<C extends CloudConfigBase & { provider: string }> extends DefinitionBase<
  C["provider"]
> {
  family: "cloud";
  imageProblem(image: string): string | undefined;
  domains(sections: Record<string, unknown>): DomainSource;
  config(sections: Record<string, unknown>, common: CloudConfigBase): C;
  problems(cloud: CloudConfigBase & { provider: string }): string[];
  program(input: CloudProgramInput): Record<string, unknown>;
  /** See CloudProviderDefinition.adoptedRelease; undefined where the provider attaches nothing. */
  adoptedRelease(entry: NodeEntry, cloud: CloudConfigBase & { provider: string }): string | undefined;
  /** Whether `molt adopt` can check the API load balancer against the endpoint (apiLoadBalancer). */
  checksEndpoint: boolean;
  /** Whether adopted nodes are taken out of the API load balancer (adoptedAttachment): adopt needs their machines. */
  attachesAdopted: boolean;
}

/**
 * The options of a machine taken into the stack: the engine imports `id` (reads it; an id
 * that names nothing fails the import, and molt previews it before recording anything),
 * takes every input from what it read (`ignoreChanges: ["*"]`, so no update is ever planned
 * for a machine molt did not build), and deletes it when its node leaves the stack.
 */
export function importOptions(id: string): pulumi.CustomResourceOptions {
  return { import: id, ignoreChanges: ["*"], retainOnDelete: false };
}

/** The resource plugin a Pulumi SDK package asks the engine for: its own package version. */
export function sdkPlugin(name: string, sdkPackage: string): PluginRequirement {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pkg = require(`${sdkPackage}/package.json`) as { version: string };
  return { kind: "resource", name, version: pkg.version.replace(/^v/, "") };
}
