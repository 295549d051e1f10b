// An existing keepalived VRRP group on adopted nodes (KubeOne's vSphere example: keepalived
// on each control-plane VM, its own virtual_router_id, auth_pass, fixed priorities with
// preemption, a check script that lowers the priority). molt's new nodes join that group
// rather than start a second one for the same VIP: one election, so the hand-off is one
// priority-0 advert and never two holders. Plain functions over keepalived.conf's text; the
// auth_pass is a secret and never appears in a problem this module reports.

/** Where keepalived reads its configuration (the distributions' default, and KubeOne's). */
export const KEEPALIVED_CONF_PATH = "/etc/keepalived/keepalived.conf";

export interface VrrpAuth {
  type: "PASS" | "AH";
  /** The group's password: a secret. */
  pass: string;
}

export interface VrrpInstance {
  name: string;
  virtualRouterId?: number;
  interface?: string;
  /** keepalived's default 100 when unset. */
  priority: number;
  /** Seconds between adverts (keepalived's default 1). */
  advertIntervalSeconds: number;
  /** The addresses of virtual_ipaddress, without prefix or options. */
  addresses: string[];
  auth?: VrrpAuth;
  /** unicast_peer or unicast_src_ip: a peer list instead of multicast. */
  unicast: boolean;
  /** vrrp_version of the instance or of global_defs (2 when unset). */
  version: number;
  /** What the instance's track scripts add to its priority while they succeed (positive weights). */
  positiveWeight: number;
}

export interface KeepalivedConf {
  instances: VrrpInstance[];
  /** `include` statements: parts of the configuration this text does not show. */
  includes: string[];
}

interface Statement {
  words: string[];
  block?: Statement[];
}

/** Statements and blocks of keepalived's syntax: `#` and `!` start comments, `{ }` nest. */
function statements(text: string): Statement[] {
  const tokens: (string | "{" | "}" | "\n")[] = [];
  for (const line of text.split("\n")) {
    const re = /"([^"]*)"|([{}])|([^\s{}"#!]+)|([#!])/g;
    let m: RegExpExecArray | null;
    while ((m = re.exec(line))) {
      if (m[4]) break; // a comment runs to the end of the line
      tokens.push(m[1] ?? m[2] ?? m[3]);
    }
    tokens.push("\n");
  }
  let i = 0;
  const parse = (): Statement[] => {
    const out: Statement[] = [];
    let words: string[] = [];
    const flush = () => {
      if (words.length) out.push({ words });
      words = [];
    };
    while (i < tokens.length) {
      const t = tokens[i++];
      if (t === "\n") flush();
      else if (t === "{") {
        const s: Statement = { words, block: parse() };
        words = [];
        out.push(s);
      } else if (t === "}") {
        flush();
        return out;
      } else words.push(t);
    }
    flush();
    return out;
  };
  return parse();
}

const find = (b: Statement[] | undefined, key: string) => b?.find((s) => s.words[0] === key);
const intOf = (s: Statement | undefined): number | undefined => {
  const v = s?.words[1];
  return v !== undefined && /^-?\d+$/.test(v) ? Number(v) : undefined;
};

/** keepalived.conf's VRRP instances (and any `include`). Never throws: odd text gives what it can read. */
export function parseKeepalivedConf(text: string): KeepalivedConf {
  const top = statements(text);
  const globalVersion = intOf(find(find(top, "global_defs")?.block, "vrrp_version")) ?? 2;
  const scriptWeight = new Map<string, number>();
  for (const s of top)
    if (s.words[0] === "vrrp_script" && s.words[1]) scriptWeight.set(s.words[1], intOf(find(s.block, "weight")) ?? 0);
  const instances = top
    .filter((s) => s.words[0] === "vrrp_instance")
    .map((s): VrrpInstance => {
      const b = s.block ?? [];
      const authBlock = find(b, "authentication")?.block;
      const type = find(authBlock, "auth_type")?.words[1]?.toUpperCase();
      const pass = find(authBlock, "auth_pass")?.words[1];
      const tracked = (find(b, "track_script")?.block ?? []).map((t) => {
        // "name" or "name weight N": a weight here overrides the script's own.
        const w = t.words.indexOf("weight");
        return w > 0 ? Number(t.words[w + 1]) || 0 : (scriptWeight.get(t.words[0]) ?? 0);
      });
      const vrid = intOf(find(b, "virtual_router_id"));
      return {
        name: s.words[1] ?? "",
        ...(vrid !== undefined ? { virtualRouterId: vrid } : {}),
        ...(find(b, "interface")?.words[1] ? { interface: find(b, "interface")!.words[1] } : {}),
        priority: intOf(find(b, "priority")) ?? 100,
        advertIntervalSeconds: Number(find(b, "advert_int")?.words[1] ?? 1),
        addresses: (find(b, "virtual_ipaddress")?.block ?? []).map((a) => a.words[0].replace(/\/\d+$/, "")),
        ...((type === "PASS" || type === "AH") && pass ? { auth: { type, pass } } : {}),
        unicast: !!(find(b, "unicast_peer") || find(b, "unicast_src_ip")),
        version: intOf(find(b, "version")) ?? globalVersion,
        positiveWeight: tracked.filter((w) => w > 0).reduce((a, w) => a + w, 0),
      };
    });
  const includes = top.filter((s) => s.words[0] === "include").map((s) => s.words.slice(1).join(" "));
  return { instances, includes };
}

/** The VRRP group a host runs for the VIP, as molt's nodes must speak it. */
export interface VrrpGroup {
  virtualRouterId: number;
  advertIntervalSeconds: number;
  interface?: string;
  /** The host's priority while its checks pass: what a molt node must rank above. */
  effectivePriority: number;
  auth?: VrrpAuth;
}

const MULTICAST_HOW =
  "switch the group to multicast (remove unicast_src_ip and unicast_peer on every node, one node at a time), " +
  "or serve the endpoint with a load balancer and remove molt:apiEndpoint";

/** The group `host`'s keepalived.conf runs for `vip`, or what keeps molt from joining it. */
export function vrrpGroupOf(
  text: string,
  vip: string,
  host: string,
): { group: VrrpGroup; problems: [] } | { problems: string[] } {
  const conf = parseKeepalivedConf(text);
  const where = `${host}: ${KEEPALIVED_CONF_PATH}`;
  if (conf.includes.length)
    return {
      problems: [
        `${where} includes other files (${conf.includes.join(", ")}): molt reads the VRRP group from this one file ` +
          "only; put the vrrp_instance of the API endpoint into keepalived.conf itself",
      ],
    };
  const serving = conf.instances.filter((i) => i.addresses.includes(vip));
  if (serving.length === 0)
    return {
      problems: [
        `${where} has no vrrp_instance with the API endpoint VIP ${vip} in its virtual_ipaddress` +
          (conf.instances.length
            ? ` (it serves ${conf.instances.map((i) => `${i.name}: ${i.addresses.join(", ") || "none"}`).join("; ")})`
            : " (it has no vrrp_instance)") +
          `: check molt:apiEndpoint.address (${vip}) against the VIP keepalived moves on the control-plane nodes`,
      ],
    };
  if (conf.instances.length > 1)
    return {
      problems: [
        `${where} runs ${conf.instances.length} VRRP instances (${conf.instances.map((i) => i.name).join(", ")}): ` +
          "molt hands the VIP over by stopping keepalived on a node it retires, which would stop the others too; " +
          "move the other instances to a keepalived of their own (or another host) first",
      ],
    };
  const i = serving[0];
  const problems: string[] = [];
  if (i.unicast)
    problems.push(
      `${where}: vrrp_instance ${i.name} uses unicast VRRP (unicast_peer/unicast_src_ip), which molt does not ` +
        "support: every member lists its peers by address, so each node molt adds or retires would change every " +
        `other member's configuration; ${MULTICAST_HOW}`,
    );
  if (i.virtualRouterId === undefined || i.virtualRouterId < 1 || i.virtualRouterId > 255)
    problems.push(`${where}: vrrp_instance ${i.name} has no virtual_router_id (1-255)`);
  if (i.version !== 2)
    problems.push(
      `${where}: vrrp_instance ${i.name} speaks VRRP version ${i.version}; molt's nodes speak version 2 ` +
        "(keepalived's default): set vrrp_version 2 on every node first",
    );
  if (!Number.isInteger(i.advertIntervalSeconds) || i.advertIntervalSeconds < 1 || i.advertIntervalSeconds > 255)
    problems.push(
      `${where}: vrrp_instance ${i.name} has advert_int ${i.advertIntervalSeconds}; molt needs whole seconds`,
    );
  if (problems.length) return { problems };
  return {
    group: {
      virtualRouterId: i.virtualRouterId!,
      advertIntervalSeconds: i.advertIntervalSeconds,
      ...(i.interface ? { interface: i.interface } : {}),
      effectivePriority: Math.min(i.priority + i.positiveWeight, 255),
      ...(i.auth ? { auth: i.auth } : {}),
    },
    problems: [],
  };
}

/** molt:apiEndpoint as the stack configures it (the group must be the one the hosts run). */
export interface VipIntent {
  address: string;
  virtualRouterId: number;
  advertIntervalSeconds?: number;
}

/** The highest priority molt's own formula can give: molt's nodes rank from their floor up to this. */
export const MAX_MOLT_PRIORITY = 254;

/**
 * The adopted hosts' groups must be one group, and the one the stack configures; the auth_pass
 * is compared, never shown. Returns the problems (empty: molt may join it).
 */
export function vrrpGroupProblems(groups: { host: string; group: VrrpGroup }[], vip: VipIntent): string[] {
  const problems: string[] = [];
  const ids = new Set(groups.map((g) => g.group.virtualRouterId));
  const adverts = new Set(groups.map((g) => g.group.advertIntervalSeconds));
  const auths = new Set(groups.map((g) => (g.group.auth ? `${g.group.auth.type}\0${g.group.auth.pass}` : "none")));
  const list = (f: (g: VrrpGroup) => string | number) => groups.map((g) => `${g.host}: ${f(g.group)}`).join(", ");
  if (ids.size > 1)
    problems.push(`the hosts' keepalived use different virtual_router_ids (${list((g) => g.virtualRouterId)})`);
  else if (groups.length && !ids.has(vip.virtualRouterId))
    problems.push(
      `molt:apiEndpoint.virtualRouterId is ${vip.virtualRouterId}, but the hosts' keepalived group for ` +
        `${vip.address} is virtual_router_id ${[...ids][0]}: set molt:apiEndpoint.virtualRouterId: ${[...ids][0]} ` +
        "(molt's nodes join that group)",
    );
  const advert = vip.advertIntervalSeconds ?? 1;
  if (adverts.size > 1)
    problems.push(`the hosts' keepalived use different advert_int (${list((g) => g.advertIntervalSeconds)})`);
  else if (groups.length && !adverts.has(advert))
    problems.push(
      `molt:apiEndpoint.advertIntervalSeconds is ${advert}, but the hosts' group adverts every ` +
        `${[...adverts][0]} s: set molt:apiEndpoint.advertIntervalSeconds: ${[...adverts][0]}`,
    );
  if (auths.size > 1)
    problems.push(
      `the hosts' keepalived authentication differs (${list((g) => (g.auth ? `auth_type ${g.auth.type}` : "none"))}; ` +
        "passwords compared, not shown): the members of one group must share it; make it one on every host first",
    );
  const top = Math.max(...groups.map((g) => g.group.effectivePriority));
  if (groups.length && top >= MAX_MOLT_PRIORITY)
    problems.push(
      `the hosts' keepalived reach priority ${top}: molt's nodes must rank above every adopted node (so a ` +
        `preempting adopted node never takes the VIP back) and VRRP priorities end at ${MAX_MOLT_PRIORITY}; ` +
        `lower the adopted nodes' priorities below ${MAX_MOLT_PRIORITY - 10} first`,
    );
  return problems;
}

/**
 * The lowest priority a molt node may have while adopted nodes are in the group: above
 * every adopted node's priority with its checks passing. KubeOne's nodes preempt (a
 * higher-priority backup takes the VIP from a lower master), molt's do not: ranked above
 * them, a molt node that holds the VIP keeps it, and one that joins does not take it
 * (nopreempt) until the holder hands it over.
 */
export function joinPriorityFloor(adoptedPriorities: number[]): number {
  return adoptedPriorities.length ? Math.max(100, ...adoptedPriorities.map((p) => p + 1)) : 100;
}
