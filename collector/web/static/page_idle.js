// Idle GPUs: who holds each, since when, what it costs per hour, what it burns. The most
// expensive first; GPUs idle under a minute (between a bursty job's requests) apart.
import { h, kpi, table } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";
import { fleetGpus, todayUsage, WASTING_STATES, workloadHref } from "./page_fleet.js";

//: idle for less than this (seconds) is a bursty GPU between requests, not one to act on
export const SHORT_IDLE_SECONDS = 60;

// a holder key breaks after "/" and ":" on a narrow screen, not in the middle of a name
function breakable(key) {
  return key.split(/(?<=[/:])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
}

function holder(gpu) {
  if (!gpu.workloads.length) return h("span", { class: "muted" }, t("unallocated"));
  return gpu.workloads.map((w, i) => [i ? ", " : "", h("a", { href: workloadHref(w.key) }, breakable(w.key))]);
}

function teams(gpu) {
  const named = [...new Set(gpu.workloads.map((w) => [w.team, w.user].filter(Boolean).join(" · ")).filter(Boolean))];
  return named.length ? named.join(", ") : "—";
}

// the owners (top of each holder's owner chain: Deployment/ml/x, User/alice) of a GPU
function owners(gpu) {
  const named = [...new Set(gpu.workloads.map((w) => w.owner).filter(Boolean))];
  return named.length ? named.join(", ") : "—";
}

function row(gpu, used, now) {
  return h("tr", { "data-uuid": gpu.uuid, "data-state": gpu.state },
    h("td", { class: "nw" }, f.gpuLabel(gpu)),
    h("td", {}, gpu.model),
    h("td", { "data-col": "holder", class: "holder" }, holder(gpu)),
    h("td", { "data-col": "team" }, teams(gpu)),
    h("td", { "data-col": "owner" }, owners(gpu)),
    h("td", { class: "nw" }, gpu.idle_since === null ? "—" : f.stamp(gpu.idle_since)),
    h("td", { class: "num" }, gpu.idle_since === null ? "—" : f.duration(now - gpu.idle_since)),
    h("td", { class: "num", "data-col": "price" }, f.money(used.price_per_hour)),
    h("td", { class: "num", "data-col": "power" }, f.watts(gpu.power_watts)),
    h("td", { class: "num", "data-col": "memory" }, gpu.memory_used_bytes == null ? "—" : f.gib(gpu.memory_used_bytes)),
    h("td", { class: "num", "data-col": "idle-energy" }, f.kwh(used.usage.idle_energy_joules)));
}

// the idle GPUs alone: /v1/fleet and /v1/gpus/usage filtered by state on the server
export async function render({ summary }) {
  const [gpus, usage] = await Promise.all([fleetGpus({ state: WASTING_STATES }),
    todayUsage(summary.now, { state: WASTING_STATES })]);
  const byUuid = new Map(usage.gpus.map((g) => [g.uuid, g]));
  const blank = { price_per_hour: 0, usage: { idle_energy_joules: 0 } };
  const price = (g) => (byUuid.get(g.uuid) || blank).price_per_hour;
  const idleFor = (g) => (g.idle_since === null ? 0 : summary.now - g.idle_since);
  const idle = gpus.sort((a, b) => price(b) - price(a) || idleFor(b) - idleFor(a) || a.uuid.localeCompare(b.uuid));
  const cur = usage.currency;
  const wasteNow = idle.reduce((sum, g) => sum + price(g), 0);
  const energy = idle.reduce((sum, g) => sum + (byUuid.get(g.uuid) || blank).usage.idle_energy_joules, 0);
  const columns = [{ label: t("col.gpu") }, { label: t("col.model") }, { label: t("col.holder") },
    { label: t("col.team_user") }, { label: t("col.owner") }, { label: t("col.idle_since") }, { label: t("col.idle_for"), num: true },
    { label: `${t("col.cost_hour")} (${cur})`, num: true }, { label: `${t("col.power")} (W)`, num: true },
    { label: `${t("col.memory_held")} (GiB)`, num: true }, { label: `${t("col.idle_energy")} (kWh)`, num: true }];
  const settled = idle.filter((g) => g.idle_since === null || idleFor(g) >= SHORT_IDLE_SECONDS);
  const short = idle.filter((g) => !settled.includes(g));
  const rows = (list) => list.map((g) => row(g, byUuid.get(g.uuid) || blank, summary.now));
  return h("div", { class: "page" },
    h("h1", {}, t("idle.title")),
    h("div", { class: "kpis" },
      kpi(t("idle.count"), "idle-count", f.int(idle.length)),
      kpi(t("idle.waste_now"), "waste-now", f.money(wasteNow), `${cur}/h`),
      kpi(t("idle.energy_today"), "idle-energy", f.kwh(energy), "kWh")),
    idle.length ? table(columns, rows(settled), { "data-table": "idle" }) : h("p", { class: "muted" }, t("idle.none")),
    short.length
      ? h("details", { "data-figure": "short-idle" },
        h("summary", {}, t("idle.short", { n: short.length })),
        table(columns, rows(short), { "data-table": "idle-short" }))
      : null);
}
