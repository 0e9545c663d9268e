import { z } from 'zod';
import { WINDOWS, type Window, type WindowName } from './algorithms/fixed-window/model.js';

/**
 * Window lengths as people write them, in the policy file and in Envoy's rate
 * limit configuration alike: a unit's name (`minute`, `week`), or a length
 * such as `90s`, `15m`, `1h30m`, `2d`, `500ms`. One parser for both files, so
 * a window means the same wherever it is written.
 */

/** The units a window may be named by (any case); Envoy's rate limit configuration knows the same. */
export const UNITS = ['second', 'minute', 'hour', 'day', 'week', 'month', 'year'] as const;
export type UnitName = (typeof UNITS)[number];

/** A unit's length: a week of 7 days, a month of 30 and a year of 365, as envoyproxy/ratelimit counts them. */
export const UNIT_MS: Readonly<Record<UnitName, number>> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
};

/** The longest window: a year of 366 days (a longer one is a typo, and its expiry would not fit a PEXPIRE). */
export const MAX_WINDOW_MS = 366 * 86_400_000;

/** Parts of a length, largest first, each at most once: `1h30m`, `90s`, `1.5h`, `2d12h`, `250ms`. */
const PART = /(\d+(?:\.\d+)?)(ms|d|h|m|s)/y;
const PART_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
const PART_ORDER = ['d', 'h', 'm', 's', 'ms'] as const;

export const WINDOW_LENGTH_MESSAGE = `must be a unit (${UNITS.join(', ')}) or a whole number of ms from 1 ms to 366 days, such as 90s, 15m, 1h30m, 2d`;

/** A window's length in ms, or undefined when `value` is no window (not text, unknown unit, out of range, a fraction of a ms). */
export function parseWindowLength(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.trim().toLowerCase();
  if ((UNITS as readonly string[]).includes(text)) return UNIT_MS[text as UnitName];
  if (text === '') return undefined;
  let ms = 0;
  let next = 0; // index in PART_ORDER the next part may have, at least: largest first, each unit once
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const match = PART.exec(text);
    if (match === null) return undefined;
    const order = PART_ORDER.indexOf(match[2] as (typeof PART_ORDER)[number]);
    if (order < next) return undefined;
    next = order + 1;
    ms += Number(match[1]) * PART_MS[match[2] as keyof typeof PART_MS];
  }
  // 1.5h is whole; 0.5ms is not. Rounding absorbs float noise (0.1h = 360000.00000000006).
  const rounded = Math.round(ms);
  if (Math.abs(ms - rounded) > 1e-6 || rounded < 1 || rounded > MAX_WINDOW_MS) return undefined;
  return rounded;
}

/** A zod field for a window: the length in ms, or the issue WINDOW_LENGTH_MESSAGE. */
export const windowLength = z.unknown().transform((value, ctx) => {
  const ms = parseWindowLength(value);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: WINDOW_LENGTH_MESSAGE });
    return z.NEVER;
  }
  return ms;
});

/**
 * A length as the models take it: a length that is exactly a second, minute,
 * hour or day keeps that name, and with it that window's key
 * (`<key>:minute`, docs/keys.md) and its UTC alignment; any other is its ms.
 */
export function windowOfLength(ms: number): Window {
  for (const name of Object.keys(WINDOWS) as WindowName[]) if (WINDOWS[name].ms === ms) return name;
  return ms;
}

/** A window as people read it: its name, or its length in parts largest first (`15m`, `1h30m`, `1m30s`, `7d`). */
export function formatWindow(window: Window): string {
  if (typeof window !== 'number') return window;
  let rest = window;
  let text = '';
  for (const part of PART_ORDER) {
    const n = Math.floor(rest / PART_MS[part]);
    if (n > 0) text += `${n}${part}`;
    rest -= n * PART_MS[part];
  }
  return text;
}
