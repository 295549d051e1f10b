// Every provider molt knows, in one list. Adding a provider: a definition module beside
// these (infra/providers/<kind>/index.ts: kind, config sections, plugins, image check,
// failure domains, node component), its line here, its tests and its docs. Nothing else
// in molt names a provider.
import { awsProvider } from "./aws";
import { azureProvider } from "./azure";
import { labProvider } from "./lab";
import type { CloudConfigBase, RegisteredCloudProvider } from "./provider";
import { vsphereProvider } from "./vsphere";

export const CLOUD_PROVIDERS = [awsProvider, azureProvider, vsphereProvider] as const;
export const PROVIDERS = [labProvider, ...CLOUD_PROVIDERS] as const;

export type ProviderKind = (typeof PROVIDERS)[number]["kind"];
export type CloudProviderKind = (typeof CLOUD_PROVIDERS)[number]["kind"];
export type AnyProvider = (typeof PROVIDERS)[number];
export type AnyCloudProvider = (typeof CLOUD_PROVIDERS)[number];

type ConfigOf<P> = P extends RegisteredCloudProvider<infer C> ? C : never;
/** A cloud stack's typed settings (StackConfig.cloud), one variant per cloud provider. */
export type CloudConfig = ConfigOf<AnyCloudProvider>;

export const PROVIDER_KINDS = PROVIDERS.map((p) => p.kind) as [ProviderKind, ...ProviderKind[]];

export function providerOf(kind: unknown): AnyProvider | undefined {
  return PROVIDERS.find((p) => p.kind === kind);
}

export function cloudProviderOf(kind: unknown): AnyCloudProvider | undefined {
  return CLOUD_PROVIDERS.find((p) => p.kind === kind);
}

/** Component types whose resources belong to no node, of every provider (orchestrator/stack/targets.ts). */
export const CLUSTER_WIDE_TYPES: readonly string[] = PROVIDERS.flatMap((p) => p.clusterWideTypes);

/** The typed settings of a cloud from its sections: the one place the variant is picked by kind. */
export function cloudConfigOf(
  def: AnyCloudProvider,
  sections: Record<string, unknown>,
  common: CloudConfigBase,
): CloudConfig {
  return def.config(sections, common) as CloudConfig;
}
