// Idle GPUs: who holds each, since when, what it costs per hour, what it burns. The most
// expensive first; GPUs idle under a minute (between a bursty job's requests) apart.
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";
import { fleetGpus, todayUsage, WASTING_STATES, workloadHref } from "./page_fleet.js";
import { dataTable, stateOf } from "./table.js";

//: idle for less than this (seconds) is a bursty GPU between requests, not one to act on
export const SHORT_IDLE_SECONDS = 60;

// a holder key breaks after "/" and ":" on a narrow screen, not in the middle of a name
function breakable(key) {
  return key.split(/(?<=[/:])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
}

function holder(gpu) {
  if (!gpu.workloads.length) return h("span", { class: "muted" }, t("unallocated"));
  return gpu.workloads.map((w, i) => [i ? ", " : "", h("a", { href: workloadHref(w.key), translate: "no" }, breakable(w.key))]);
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
    h("td", { class: "nw", translate: "no" }, f.gpuLabel(gpu)),
    h("td", { translate: "no" }, gpu.model),
    h("td", { "data-col": "holder", class: "holder" }, holder(gpu)),
    h("td", { "data-col": "team", translate: "no" }, teams(gpu)),
    h("td", { "data-col": "owner", translate: "no" }, owners(gpu)),
    h("td", { class: "nw" }, gpu.idle_since === null ? "—" : f.stamp(gpu.idle_since)),
    h("td", { class: "num" }, gpu.idle_since === null ? "—" : f.duration(now - gpu.idle_since)),
    h("td", { class: "num", "data-col": "price" }, f.money(used.price_per_hour)),
    h("td", { class: "num", "data-col": "power" }, f.watts(gpu.power_watts)),
    h("td", { class: "num", "data-col": "memory" }, gpu.memory_used_bytes == null ? "—" : f.gib(gpu.memory_used_bytes)),
    h("td", { class: "num", "data-col": "idle-energy" }, f.kwh(used.usage.idle_energy_joules)));
}

const holders = (g) => g.workloads.map((w) => w.key).join(", ");
const firstTeam = (g) => (g.workloads.find((w) => w.team) || {}).team || "";

// the idle table's columns, filters and search; `used(g)` is its /v1/gpus/usage row
function idleSpec(id, cur, used, now) {
  const idleFor = (g) => (g.idle_since === null ? null : now - g.idle_since);
  return {
    id, sort: { key: "price", dir: "desc" }, row: (g) => row(g, used(g), now),
    columns: [
      { key: "gpu", label: t("col.gpu"), value: (g) => f.gpuLabel(g) },
      { key: "model", label: t("col.model"), value: (g) => g.model },
      { key: "holder", label: t("col.holder"), value: holders },
      { key: "team", label: t("col.team_user"), value: teams },
      { key: "owner", label: t("col.owner"), value: owners },
      { key: "since", label: t("col.idle_since"), value: (g) => g.idle_since },
      { key: "for", label: t("col.idle_for"), num: true, value: idleFor },
      { key: "price", label: `${t("col.cost_hour")} (${cur})`, num: true, value: (g) => used(g).price_per_hour },
      { key: "power", label: `${t("col.power")} (W)`, num: true, value: (g) => g.power_watts },
      { key: "memory", label: `${t("col.memory_held")} (GiB)`, num: true, value: (g) => g.memory_used_bytes },
      { key: "energy", label: `${t("col.idle_energy")} (kWh)`, num: true, value: (g) => used(g).usage.idle_energy_joules / 3.6e6 },
    ],
    filters: [
      { key: "state", label: t("col.state"), value: (g) => g.state, text: (v) => t("state." + v) },
      { key: "node", label: t("col.node"), value: (g) => g.node },
      { key: "model", label: t("col.model"), value: (g) => g.model },
      { key: "team", label: t("col.team"), value: firstTeam },
    ],
    search: (g) => [g.node, holders(g), teams(g), owners(g), g.model].join(" "),
    empty: t("idle.none"),
  };
}

// a link from a fleet tile (?node=...) filters the table by that node, once
function followLink(spec, params) {
  const state = stateOf(spec);
  const node = params.get("node") || "";
  if (node && state.linked !== node) state.filters.node = node;
  state.linked = node;
}

// the idle GPUs alone: /v1/fleet and /v1/gpus/usage filtered by state on the server
export async function render({ summary, params }) {
  const [gpus, usage] = await Promise.all([fleetGpus({ state: WASTING_STATES }),
    todayUsage(summary.now, { state: WASTING_STATES })]);
  const byUuid = new Map(usage.gpus.map((g) => [g.uuid, g]));
  const blank = { price_per_hour: 0, usage: { idle_energy_joules: 0 } };
  const used = (g) => byUuid.get(g.uuid) || blank;
  const idleFor = (g) => (g.idle_since === null ? 0 : summary.now - g.idle_since);
  const cur = usage.currency;
  const wasteNow = gpus.reduce((sum, g) => sum + used(g).price_per_hour, 0);
  const energy = gpus.reduce((sum, g) => sum + used(g).usage.idle_energy_joules, 0);
  const settled = gpus.filter((g) => g.idle_since === null || idleFor(g) >= SHORT_IDLE_SECONDS);
  const short = gpus.filter((g) => !settled.includes(g));
  const spec = idleSpec("idle", cur, used, summary.now);
  followLink(spec, params);
  return h("div", { class: "page" },
    h("h1", {}, t("idle.title")),
    h("div", { class: "kpis" },
      kpi(t("idle.count"), "idle-count", f.int(gpus.length)),
      kpi(t("idle.waste_now"), "waste-now", f.money(wasteNow), `${cur}/h`),
      kpi(t("idle.energy_today"), "idle-energy", f.kwh(energy), "kWh")),
    gpus.length ? dataTable(spec, settled) : h("p", { class: "muted" }, t("idle.none")),
    short.length
      ? h("details", { "data-figure": "short-idle" },
        h("summary", {}, t("idle.short", { n: short.length })),
        dataTable(idleSpec("idle-short", cur, used, summary.now), short))
      : null);
}
