// etcd's patch floors for minor upgrades: before a member of the next minor joins, every
// member still on the current minor must run at least the patch release etcd's upgrade
// guide names. Pure; the planner refuses up front (nothing changed) when this answers.
//
// Why the floors (etcd's upgrade guides and the blog posts they link; the commit log has when
// each floor was raised):
// - etcd.io/docs/v3.6/upgrades/upgrade_3_6 "Update 3.5": all 3.5 members on 3.5.32 or later.
// - etcd.io/blog/2025/upgrade_from_3.5_to_3.6_issue: members on 3.5.1-3.5.19 persisted
//   learner promotions only in the v2store; after the upgrade voters turn back into
//   learners and etcd refuses to start: "membership: too many learner member in cluster".
// - .../upgrade_from_3.5_to_3.6_issue_followup: in rolling replacements "such as those
//   performed by Cluster API" a new learner may receive a snapshot with wrong membership
//   from an old 3.5 member; fixed in 3.5.24.
// - .../zombie_members_upgrade: removed members reappear after the upgrade; 3.5.26 syncs
//   the v3store from the v2store first.
// - etcd.io/blog/2026/july-patch-release: 3.5.32 adds `etcdutl check v2store` over WAL
//   records and --v2-deprecation=write-only-skip-check.
// - etcd.io/docs/v3.7/upgrades/upgrade_3_7 "Update 3.6": all 3.6 members on 3.6.11 or later.

import { compareVersions, fullVersionOf, minorName } from "./versions";

export interface UpgradeFloor {
  /** The lowest patch release of the current minor from which the next minor may join. */
  floor: string;
  guide: string;
  why: string;
}

/** Per current minor ("3.5"): the floor before a member of the next minor joins. */
export const ETCD_UPGRADE_FLOORS: Readonly<Record<string, UpgradeFloor>> = {
  "3.5": {
    floor: "3.5.32",
    guide: "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/",
    why:
      'older 3.5 members can hand a new member a snapshot with wrong membership ("too many learner member", ' +
      "zombie members of long ago) that 3.6 then takes as the truth",
  },
  "3.6": {
    floor: "3.6.11",
    guide: "https://etcd.io/docs/v3.7/upgrades/upgrade_3_7/",
    why: "earlier 3.6 patch releases may not be compatible with a rolling upgrade to 3.7",
  },
};

/**
 * Why a member of etcd `joining` may not join a cluster whose members run `members`, by
 * etcd's patch floors; undefined when it may (or when the rule does not apply: the same
 * minor, no floor known for the members' minor, or versions without a patch or unreadable -
 * the minor rules of etcdVersionProblem cover those).
 */
export function etcdUpgradePatchProblem(
  members: { name: string; version: string }[],
  joining: string | undefined,
): string | undefined {
  const j = fullVersionOf(joining);
  if (!j) return undefined;
  const below: { name: string; version: string; minor: string; floor: UpgradeFloor }[] = [];
  for (const m of members) {
    const v = fullVersionOf(m.version);
    if (!v || v.major !== j.major || v.minor + 1 !== j.minor) continue;
    const minor = minorName(v);
    const floor = ETCD_UPGRADE_FLOORS[minor];
    if (floor && compareVersions(v, fullVersionOf(floor.floor)!) < 0) below.push({ ...m, minor, floor });
  }
  if (below.length === 0) return undefined;
  const { minor, floor } = below[0];
  const next = minorName(j);
  return (
    `etcd ${joining} may not join yet: etcd's upgrade guide (${floor.guide}) requires every ${minor} member to run ` +
    `${floor.floor} or later before a ${next} member joins (${floor.why}). ` +
    `Below it: ${below.map((b) => `${b.name} (${b.version})`).join(", ")}. Nothing was changed. ` +
    `Roll the cluster to an image with etcd ${floor.floor} or later first (the same minor; every member is ` +
    `replaced, add-first), then to ${next}.`
  );
}
