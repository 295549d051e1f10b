// molt:apiEndpoint (provider-neutral) and molt:vsphere.staticAddresses: how clients reach
// the API servers when there is no cloud load balancer, and fixed node addresses for it.
// Validated here; orchestrator/config/index.ts calls in.
import { createHash } from "node:crypto";
import { z } from "zod";
import { expandAddressPool, inSubnet } from "../core/addresses";
import { isIPv4 } from "../core/addresses";
import { type VipSettings } from "../../infra/vip/keepalived";
import type { StaticAddressesConfig } from "../../infra/providers/vsphere/static-addresses";

const ipv4 = (what: string) => z.string({ message: what }).refine(isIPv4, what);

export const apiEndpointSchema = z
  .object({
    mode: z.enum(["loadBalancer", "vip"], {
      message:
        "loadBalancer (the provider's load balancer; default) or " +
        "vip (keepalived on the control-plane nodes moves a virtual IP)",
    }),
    address: ipv4("the VIP: an unused IPv4 address on the control-plane network").optional(),
    virtualRouterId: z
      .number({ message: "a VRRP router id 1-255, unique on the network segment" })
      .int("a whole number")
      .min(1, "1-255")
      .max(255, "1-255")
      .optional(),
    advertIntervalSeconds: z.number().int("a whole number").min(1).max(255).optional(),
  })
  .strict();

/** The lab's default VRRP router id: stable per lab (each lab has a bridge of its own anyway). */
function labRouterId(lab: string): number {
  return (createHash("sha256").update(lab).digest()[0] % 255) + 1;
}

/**
 * The VIP settings for VIP mode, or undefined for the load balancer; problems are added to
 * `problems` with their key. `lab`: the lab's subnet and name (defaults come from them).
 */
export function resolveApiEndpoint(
  raw: unknown,
  provider: string,
  problems: string[],
  ctx: { lab?: { name: string; subnet: string }; controlPlaneEndpoint?: string; staticPool?: string[] },
): VipSettings | undefined {
  if (raw === undefined) return undefined;
  const r = apiEndpointSchema.safeParse(raw);
  if (!r.success) {
    for (const i of r.error.issues)
      problems.push(`${["molt:apiEndpoint", ...i.path.map(String)].join(".")}: ${i.message}`);
    return undefined;
  }
  const e = r.data;
  if (e.mode === "loadBalancer") {
    if (e.address !== undefined || e.virtualRouterId !== undefined || e.advertIntervalSeconds !== undefined)
      problems.push("molt:apiEndpoint: address, virtualRouterId and advertIntervalSeconds apply to mode vip only");
    return undefined;
  }
  if (provider === "aws" || provider === "azure") {
    problems.push(
      `molt:apiEndpoint.mode: vip is not possible on ${provider}: its network drops VRRP and gratuitous ARP; ` +
        "use its load balancer (remove molt:apiEndpoint)",
    );
    return undefined;
  }
  const before = problems.length;
  let address = e.address;
  let virtualRouterId = e.virtualRouterId;
  if (ctx.lab) {
    const prefix = ctx.lab.subnet.split(".").slice(0, 3).join(".");
    address ??= `${prefix}.5`;
    virtualRouterId ??= labRouterId(ctx.lab.name);
    const host = Number(address.split(".")[3]);
    // The lab gives machines .10-.249 and the host .1.
    if (!address.startsWith(`${prefix}.`) || host < 2 || (host >= 10 && host <= 249) || host === 255)
      problems.push(
        `molt:apiEndpoint.address: ${address} is not free in the lab subnet ${ctx.lab.subnet}: ` +
          `use ${prefix}.2-${prefix}.9 or ${prefix}.250-${prefix}.254`,
      );
  } else {
    if (address === undefined)
      problems.push(
        "molt:apiEndpoint.address: required for mode vip: an unused IPv4 address on the control-plane network",
      );
    if (virtualRouterId === undefined)
      problems.push(
        "molt:apiEndpoint.virtualRouterId: required for mode vip: " +
          "a VRRP router id (1-255) no other VRRP router on the segment uses",
      );
    const host = ctx.controlPlaneEndpoint?.replace(/:\d+$/, "");
    if (address && host && isIPv4(host) && host !== address)
      problems.push(
        `molt:bootstrap.controlPlaneEndpoint: ${ctx.controlPlaneEndpoint} must name the VIP ${address} ` +
          "(or a DNS name that resolves to it)",
      );
    if (address && ctx.staticPool?.includes(address))
      problems.push(`molt:apiEndpoint.address: ${address} is also in molt:vsphere.staticAddresses.pool`);
  }
  if (problems.length > before || address === undefined || virtualRouterId === undefined) return undefined;
  return {
    address,
    virtualRouterId,
    ...(e.advertIntervalSeconds ? { advertIntervalSeconds: e.advertIntervalSeconds } : {}),
  };
}

/** Checks a static address pool; returns its expanded addresses (empty when it is unusable). */
export function checkStaticAddresses(s: StaticAddressesConfig, replicas: unknown, problems: string[]): string[] {
  let pool: string[];
  try {
    pool = expandAddressPool(s.pool);
  } catch (e) {
    problems.push(`molt:vsphere.staticAddresses.pool: ${(e as Error).message}`);
    return [];
  }
  const outside = pool.filter((a) => !inSubnet(a, s.gateway, s.prefixLength));
  if (outside.length)
    problems.push(
      `molt:vsphere.staticAddresses.pool: ${outside.join(", ")} not in the gateway's network ` +
        `${s.gateway}/${s.prefixLength}`,
    );
  if (pool.includes(s.gateway)) problems.push(`molt:vsphere.staticAddresses.pool: holds the gateway ${s.gateway}`);
  if (typeof replicas === "number" && pool.length < replicas + 1)
    problems.push(
      `molt:vsphere.staticAddresses.pool: ${pool.length} address(es) for ${replicas} replicas; ` +
        "a rollout needs replicas + 1 (the surge)",
    );
  return pool;
}
