// molt:vsphere.staticAddresses: fixed node addresses from a pool, for networks without DHCP
// reservations (orchestrator/config/endpoint.ts checks the pool against the replicas).
import { z } from "zod";
import { isIPv4 } from "../../../orchestrator/core/addresses";

const ipv4 = (what: string) => z.string({ message: what }).refine(isIPv4, what);

export const staticAddressesSchema = z
  .object({
    pool: z
      .array(z.string(), { message: "node addresses: single addresses and ranges such as 10.0.0.11-10.0.0.19" })
      .min(1, "at least replicas + 1 addresses"),
    prefixLength: z.number({ message: "the network's prefix length, such as 24" }).int().min(8).max(30),
    gateway: ipv4("the default gateway's IPv4 address"),
    nameservers: z.array(ipv4("an IPv4 address")).optional(),
    searchDomains: z.array(z.string().min(1)).optional(),
  })
  .strict();

export type StaticAddressesConfig = z.infer<typeof staticAddressesSchema>;
