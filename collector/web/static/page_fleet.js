// Fleet: every node and GPU coloured by state, utilisation, waste now and today, power.
import { getJSON, query } from "./api.js";
import { stackBar } from "./charts.js";
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";

export const STATES = ["active", "allocated_idle", "unallocated", "unknown"];

// the GPUs that waste money now, as `gpufleet demo` counts them: held idle, or unallocated
export const wasting = (gpu) => gpu.state === "allocated_idle" || gpu.state === "unallocated";

export function workloadHref(key) {
  return "/ui/workload?" + new URLSearchParams({ key });
}

export function todayUsage(fleet) {
  const start = f.startOfDay(fleet.now);
  return getJSON(query("/v1/gpus/usage", { start, end: Math.max(fleet.now, start + 1) }));
}

function tile(gpu) {
  const holders = gpu.workloads.map((w) => w.key);
  const tip = [f.gpuLabel(gpu), gpu.name, t("state." + gpu.state),
    holders.length ? t("fleet.holder", { who: holders.join(", ") }) : t("fleet.free"),
    "SM " + f.pct(gpu.sm_activity), f.watts(gpu.power_watts) + " W"].join(" · ");
  const attrs = { class: `tile state-${gpu.state}`, title: tip, "data-uuid": gpu.uuid, "data-state": gpu.state };
  const inner = [h("span", { class: "tile-index" }, gpu.mig_profile || String(gpu.index)),
    h("span", { class: "tile-sm" }, gpu.state === "unknown" ? "?" : f.pct(gpu.sm_activity))];
  return holders.length ? h("a", { ...attrs, href: workloadHref(holders[0]) }, inner) : h("div", attrs, inner);
}

function nodeCard(node, gpus) {
  const models = [...new Set(gpus.map((g) => g.model))].join(", ");
  const idle = gpus.filter(wasting).length;
  return h("section", { class: "node", "data-node": node },
    h("header", {}, h("strong", {}, node), h("span", { class: "muted" }, `${models} · ${gpus.length} GPU`),
      idle ? h("span", { class: "badge" }, t("fleet.idle_gpus", { n: idle })) : null),
    h("div", { class: "tiles" }, gpus.map(tile)));
}

function byNode(gpus) {
  const nodes = new Map();
  for (const gpu of gpus) {
    if (!nodes.has(gpu.node)) nodes.set(gpu.node, []);
    nodes.get(gpu.node).push(gpu);
  }
  return nodes;
}

// a GPU uuid a second node claims (a cloned VM image): its batches are refused, say so loudly
function duplicates(fleet) {
  const found = fleet.duplicate_gpus || [];
  if (!found.length) return null;
  return h("section", { class: "card alert", "data-figure": "duplicate-gpus" },
    h("h2", {}, t("fleet.duplicates")),
    h("ul", {}, found.map((d) => h("li", { "data-uuid": d.uuid },
      t("fleet.duplicate", { uuid: d.uuid, node: d.node, by: d.claimed_by, n: f.int(d.batches_refused) })))));
}

export async function render({ fleet }) {
  const usage = await todayUsage(fleet);
  const price = new Map(usage.gpus.map((g) => [g.uuid, g.price_per_hour]));
  const wasteNow = fleet.gpus.filter(wasting).reduce((sum, g) => sum + (price.get(g.uuid) || 0), 0);
  const wasteToday = usage.gpus.reduce((sum, g) => sum + g.usage.idle_cost, 0);
  const summary = fleet.summary;
  const counts = STATES.map((key) => ({ key, label: t("state." + key), value: summary.gpus_by_state[key] || 0 }));
  return h("div", { class: "page" },
    h("h1", {}, t("fleet.title")),
    duplicates(fleet),
    h("div", { class: "kpis" },
      kpi(t("fleet.gpus"), "gpus", f.int(fleet.gpus.length)),
      kpi(t("fleet.utilisation"), "utilisation", f.pct(summary.utilisation_ratio), "", t("fleet.utilisation.note")),
      kpi(t("fleet.waste_now"), "waste-now", f.money(wasteNow), `${usage.currency}/h`),
      kpi(t("fleet.waste_today"), "waste-today", f.money(wasteToday), usage.currency, t("fleet.waste_today.note")),
      kpi(t("fleet.power"), "power", f.kw(summary.power_watts), "kW")),
    h("section", { class: "card" },
      h("h2", {}, t("fleet.states")),
      stackBar(counts, "states"),
      h("ul", { class: "legend states" }, counts.map((c) =>
        h("li", {}, h("span", { class: `swatch state-${c.key}` }), c.label, " ",
          h("strong", { "data-figure": "state-" + c.key }, f.int(c.value)))))),
    h("h2", {}, t("fleet.nodes")),
    h("div", { class: "nodes" }, [...byNode(fleet.gpus)].map(([node, gpus]) => nodeCard(node, gpus))));
}
