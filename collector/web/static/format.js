// Number and time formats shared by every page (the browser tests parse these back).
import { t } from "./i18n.js";

const fixed = (digits) =>
  new Intl.NumberFormat("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const F0 = fixed(0), F1 = fixed(1), F2 = fixed(2);

export const money = (value) => F2.format(value);
export const money0 = (value) => F0.format(value);
export const pct = (ratio) => (ratio === null || ratio === undefined ? "—" : F1.format(ratio * 100) + "%");
export const kwh = (joules) => F2.format(joules / 3.6e6);
export const kg = (grams) => F2.format(grams / 1000);
export const kw = (watts) => F2.format(watts / 1000);
export const watts = (value) => (value === null || value === undefined ? "—" : F0.format(value));
export const int = (value) => F0.format(value);
export const gib = (bytes) => F1.format(bytes / 2 ** 30);

function pad(n) {
  return String(n).padStart(2, "0");
}

export function clock(ts) {
  const d = new Date(ts * 1000);
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
}

export function stamp(ts) {
  const d = new Date(ts * 1000);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${clock(ts)} UTC`;
}

export function duration(seconds) {
  const minutes = Math.floor(Math.max(0, seconds) / 60);
  const h = Math.floor(minutes / 60);
  return h > 0 ? t("dur.hm", { h, m: pad(minutes % 60) }) : t("dur.m", { m: minutes });
}

export function startOfDay(ts) {
  return Math.floor(ts / 86400) * 86400;
}

export function gpuLabel(gpu) {
  return t("gpu.label", { node: gpu.node, index: gpu.index });
}
