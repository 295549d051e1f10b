// The maintenance window (molt:rollout.window): the days and local times a rollout may
// replace nodes, in an IANA time zone (luxon: wall-clock times across DST changes). Outside
// it a rollout does not start; when it closes mid-run the run stops at the next boundary
// between replacements (plan/control-steps.ts replacementBoundary).
import { WEEKDAYS, type MaintenanceWindow } from "../core/model";
import { DateTime, IANAZone } from "luxon";
import { z } from "zod";

const hhmm = /^([01]\d|2[0-3]):[0-5]\d$/;

export const windowSchema = z
  .object(
    {
      days: z
        .array(
          z.string().transform((d) => d.toLowerCase()),
          { message: `a list of days: ${WEEKDAYS.join(", ")}` },
        )
        .pipe(z.array(z.enum(WEEKDAYS, { message: `a day: one of ${WEEKDAYS.join(", ")}` })).min(1, "at least one day"))
        .optional(),
      start: z.string({ message: 'a local time "HH:MM" (24-hour)' }).regex(hhmm, 'a local time "HH:MM" (24-hour)'),
      end: z
        .string({ message: 'a local time "HH:MM" (24-hour), or "24:00"' })
        .refine((v) => hhmm.test(v) || v === "24:00", 'a local time "HH:MM" (24-hour), or "24:00"'),
      timeZone: z
        .string({ message: 'an IANA time zone such as "Europe/Berlin" or "UTC"' })
        .refine((v) => IANAZone.isValidZone(v), 'an IANA time zone such as "Europe/Berlin" or "UTC"'),
    },
    { message: '{ days?, start: "HH:MM", end: "HH:MM", timeZone }: when rollouts may replace nodes' },
  )
  .strict()
  .refine((w) => w.start !== w.end, {
    message: 'start and end are equal: an empty window; for the whole day write start "00:00", end "24:00"',
    path: ["end"],
  });

const minutes = (hm: string) => Number(hm.slice(0, 2)) * 60 + Number(hm.slice(3, 5));

/** The wall-clock instant `hm` on the day `day` (start of a day in the zone), "24:00" being the next midnight. */
function at(day: DateTime, hm: string): DateTime {
  if (hm === "24:00") return day.plus({ days: 1 }).startOf("day");
  return day.set({ hour: Number(hm.slice(0, 2)), minute: Number(hm.slice(3, 5)), second: 0, millisecond: 0 });
}

export type WindowState = { open: true; closesAt: DateTime } | { open: false; opensAt: DateTime };

export function windowState(w: MaintenanceWindow, t: number): WindowState {
  const now = DateTime.fromMillis(t, { zone: w.timeZone });
  const days = w.days.length ? w.days : [...WEEKDAYS];
  const opensOn = (d: DateTime) => days.includes(WEEKDAYS[d.weekday - 1]);
  const overnight = w.end !== "24:00" && minutes(w.end) < minutes(w.start);
  const today = now.startOf("day");
  // A window opened yesterday may still be open (past midnight).
  for (const day of [today.minus({ days: 1 }), today]) {
    if (!opensOn(day)) continue;
    const open = at(day, w.start);
    const close = at(overnight ? day.plus({ days: 1 }).startOf("day") : day, w.end);
    if (now >= open && now < close) return { open: true, closesAt: close };
  }
  for (let i = 0; i <= 7; i++) {
    const day = today.plus({ days: i }).startOf("day");
    const open = at(day, w.start);
    if (opensOn(day) && open > now) return { open: false, opensAt: open };
  }
  // Unreachable with at least one day: a window opens within a week.
  throw new Error(`maintenance window ${describeWindow(w)} never opens`);
}

export function describeWindow(w: MaintenanceWindow): string {
  const days = w.days.length && w.days.length < 7 ? w.days.join(",") : "every day";
  return `${days} ${w.start}-${w.end} ${w.timeZone}`;
}

const show = (d: DateTime) => d.toFormat("yyyy-LL-dd HH:mm ZZZZ");

/** Why no replacement may start at `t` (the window is closed), or undefined while it is open. */
export function windowClosedReason(w: MaintenanceWindow | undefined, t: number): string | undefined {
  if (!w) return undefined;
  const s = windowState(w, t);
  return s.open ? undefined : `the maintenance window (${describeWindow(w)}) is closed; it opens ${show(s.opensAt)}`;
}

/** A rollout started outside molt:rollout.window: nothing was changed (CLI exit 8). */
export class OutsideWindowError extends Error {
  constructor(
    readonly window: MaintenanceWindow,
    readonly opensAt: string,
  ) {
    super(
      `outside the maintenance window (molt:rollout.window: ${describeWindow(window)}); it opens ${opensAt}. ` +
        `Nothing was changed: run molt again inside the window`,
    );
    this.name = "OutsideWindowError";
  }
}

/** The open window a run starts in, as its `start` event says it. */
export interface OpenWindow {
  /** molt:rollout.window, e.g. "mon,tue 22:00-04:00 Europe/Berlin". */
  window: string;
  /** When it closes, in its time zone (ISO 8601 with the offset). */
  closesAt: string;
  /** Seconds from the start to the close, on the clock the window is judged on. */
  closesInSeconds: number;
}

/** Refuses a start outside the window; inside it, says which window and when it closes. */
export function checkWindowAtStart(w: MaintenanceWindow | undefined, t: number): OpenWindow | undefined {
  if (!w) return undefined;
  const s = windowState(w, t);
  if (!s.open) throw new OutsideWindowError(w, show(s.opensAt));
  return {
    window: describeWindow(w),
    closesAt: s.closesAt.toISO({ suppressMilliseconds: true })!,
    closesInSeconds: Math.round((s.closesAt.toMillis() - t) / 1000),
  };
}

/**
 * The wall clock the window is judged on. MOLT_TEST_CLOCK_START (test-only; an ISO time)
 * starts it at that instant when the run starts, running at real speed, so a test can make
 * a window close a few seconds into a run.
 */
export function controlsClock(env: NodeJS.ProcessEnv = process.env): () => number {
  const start = env.MOLT_TEST_CLOCK_START;
  if (!start) return Date.now;
  const at0 = Date.parse(start);
  if (Number.isNaN(at0)) throw new Error(`MOLT_TEST_CLOCK_START: not an ISO time: ${JSON.stringify(start)}`);
  const t0 = Date.now();
  return () => at0 + (Date.now() - t0);
}
