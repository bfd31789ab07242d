// Fleet: the KPIs and state bar from /v1/fleet/summary, one card per node (most waste
// first; sort, filter, search), and tiles for a page of nodes only: no page downloads every GPU.
import { getJSON, query } from "./api.js";
import { lineChart, rangeOf, rangePicker, stackBar } from "./charts.js";
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { healthBadges, healthWords, nodeHealth } from "./health.js";
import { t } from "./i18n.js";
import { dataTable } from "./table.js";

export const STATES = ["active", "allocated_idle", "unallocated", "unknown"];
export const WASTING_STATES = "allocated_idle,unallocated";
// nodes whose tiles are drawn at first (and added per "show more"): ~200 GPUs
export const NODES_PER_PAGE = 24;
const PAGE_LIMIT = 1000; // the most GPUs /v1/fleet answers per page

// the GPUs that waste money now, as `gpufleet demo` counts them: held idle, or unallocated
export const wasting = (gpu) => gpu.state === "allocated_idle" || gpu.state === "unallocated";

export function workloadHref(key) {
  return "/ui/workload?" + new URLSearchParams({ key });
}

// /v1/gpus/usage since 00:00 UTC; `filters` (state, node, limit, ...) ask for a page
export function todayUsage(now, filters = {}) {
  const start = f.startOfDay(now);
  return getJSON(query("/v1/gpus/usage", { start, end: Math.max(now, start + 1), ...filters }));
}

// every GPU of /v1/fleet matching `filters`, page after page
export async function fleetGpus(filters) {
  const gpus = [];
  let cursor = null;
  do {
    const params = { ...filters, limit: PAGE_LIMIT, ...(cursor ? { cursor } : {}) };
    const page = await getJSON(query("/v1/fleet", params));
    gpus.push(...page.gpus);
    cursor = page.next_cursor;
  } while (cursor);
  return gpus;
}

// the style set through the CSSOM: the Content-Security-Policy refuses style attributes
function smBar(percent, what) {
  const fill = h("span", {});
  fill.style.width = `${percent}%`;
  return h("span", { class: `tile-bar tile-${what}`, [`data-${what}`]: percent }, fill);
}

// a second cue besides colour (deuteranopia): a glyph per state, drawn by the stylesheet
function tile(gpu) {
  const holders = gpu.workloads.map((w) => w.key);
  const memory = gpu.memory_used_bytes == null ? null
    : gpu.memory_total_bytes ? f.pct(gpu.memory_used_bytes / gpu.memory_total_bytes) : f.gib(gpu.memory_used_bytes) + " GiB";
  const tip = [f.gpuLabel(gpu), gpu.name, t("state." + gpu.state),
    holders.length ? t("fleet.holder", { who: holders.join(", ") }) : t("fleet.free"),
    "SM " + f.pct(gpu.sm_activity), t("fleet.memory", { m: memory ?? "—" }), f.watts(gpu.power_watts) + " W",
    gpu.healthy === false ? t("fleet.unhealthy") : t("fleet.healthy"), ...healthWords(gpu)].join(" · ");
  const ailing = (gpu.problems || []).length ? " ailing" : "";
  const attrs = { class: `tile state-${gpu.state}${gpu.healthy === false ? " sick" : ""}${ailing}`, title: tip,
    "aria-label": tip, "data-uuid": gpu.uuid, "data-state": gpu.state };
  const bar = gpu.sm_activity == null ? 0 : Math.round(Math.min(1, gpu.sm_activity) * 100);
  const memoryShare = gpu.memory_used_bytes == null || !gpu.memory_total_bytes ? null
    : Math.round(Math.min(1, gpu.memory_used_bytes / gpu.memory_total_bytes) * 100);
  const inner = [h("span", { class: "tile-index", translate: "no" }, gpu.mig_profile || String(gpu.index),
    gpu.healthy === false ? h("span", { class: "tile-warn", "data-health": "bad" }, "!") : null),
    h("span", { class: "tile-sm" }, gpu.state === "unknown" ? "?" : f.pct(gpu.sm_activity)),
    smBar(bar, "sm"), memoryShare === null ? null : smBar(memoryShare, "mem"), healthBadges(gpu)];
  // an unallocated GPU opens the idle page at its node; a held one, its workload
  const href = holders.length ? workloadHref(holders[0]) : "/ui/idle?" + new URLSearchParams({ node: gpu.node });
  return h("a", { ...attrs, href }, inner);
}

function nodeCard(node, gpus) {
  const idle = STATES.filter((s) => wasting({ state: s })).reduce((n, s) => n + node.gpus_by_state[s], 0);
  return h("section", { class: "node", "data-node": node.node },
    h("header", {}, h("strong", { translate: "no" }, node.node),
      h("span", { class: "muted" }, h("span", { translate: "no" }, node.models.join(", ")), ` · ${node.gpus} GPU`),
      node.healthy ? null : h("span", { class: "badge bad", "data-health": "bad" }, t("fleet.unhealthy")),
      idle ? h("span", { class: "badge" }, t("fleet.idle_gpus", { n: idle }), " · ", f.money(node.waste_per_hour), "/h") : null),
    h("div", { class: "tiles" }, (gpus || []).map(tile)), nodeHealth(gpus || []));
}

// the cards of `nodes`, with their tiles fetched in one go (a page per 1,000 GPUs)
async function nodeCards(nodes) {
  if (!nodes.length) return [];
  const gpus = await fleetGpus({ node: nodes.map((n) => n.node).join(",") });
  const byNode = new Map(nodes.map((n) => [n.node, []]));
  for (const gpu of gpus) byNode.get(gpu.node)?.push(gpu);
  return nodes.map((n) => nodeCard(n, byNode.get(n.node)));
}

const idleCount = (n) => n.gpus_by_state.allocated_idle + n.gpus_by_state.unallocated;

// the node list: a table's sort, filters, search and pages, drawn as cards
function nodeSpec(currency) {
  return {
    id: "nodes", pageSize: NODES_PER_PAGE, sort: { key: "waste", dir: "desc" },
    columns: [
      { key: "node", label: t("col.node"), value: (n) => n.node },
      { key: "waste", label: `${t("fleet.waste_now")} (${currency}/h)`, num: true, value: (n) => n.waste_per_hour },
      { key: "idle", label: t("col.idle_gpus"), num: true, value: idleCount },
      { key: "gpus", label: t("fleet.gpus"), num: true, value: (n) => n.gpus },
      { key: "models", label: t("col.model"), value: (n) => n.models.join(" ") },
      { key: "healthy", label: t("col.health"), value: (n) => (n.healthy ? "ok" : "unhealthy") },
    ],
    filters: [
      { key: "state", label: t("col.state"), value: (n) => (idleCount(n) ? "wasting" : "busy"), text: (v) => t("fleet.filter." + v) },
      { key: "model", label: t("col.model"), value: (n) => n.models.join(", ") },
      { key: "health", label: t("col.health"), value: (n) => (n.healthy ? "ok" : "unhealthy"), text: (v) => t("fleet.health." + v) },
    ],
    search: (n) => n.node,
    draw: async (shown) => h("div", { class: "nodes" }, await nodeCards(shown)),
  };
}

// a GPU uuid a second node claims (a cloned VM image): its batches are refused, say so loudly
function duplicates(found) {
  if (!found.length) return null;
  return h("section", { class: "card alert", "data-figure": "duplicate-gpus" },
    h("h2", {}, t("fleet.duplicates")),
    h("ul", {}, found.map((d) => h("li", { "data-uuid": d.uuid },
      t("fleet.duplicate", { uuid: d.uuid, node: d.node, by: d.claimed_by, n: f.int(d.batches_refused) })))));
}

// the fleet hour by hour over the picked window: its KPIs and its two charts share it
function trendSection(trend, range, now, redraw) {
  const hours = trend.hours;
  const active = hours.reduce((sum, x) => sum + x.active_gpu_hours, 0);
  const idle = hours.reduce((sum, x) => sum + x.idle_gpu_hours, 0);
  const waste = hours.reduce((sum, x) => sum + x.idle_cost, 0);
  const opts = { tStart: now - range.seconds, tEnd: now, gap: 2.5 * 3600 };
  const series = (name, value) => [{ name, points: hours.map((x) => ({ t: x.hour_start, v: value(x) })) }];
  return h("section", { class: "card", "data-figure": "trend" },
    h("div", { class: "title-row" }, h("h2", {}, t("fleet.trend")), rangePicker("fleet", range.name, redraw)),
    h("div", { class: "kpis" },
      kpi(t("fleet.trend.utilisation", { range: t("range." + range.name) }), "trend-utilisation",
        active + idle > 0 ? f.pct(active / (active + idle)) : "—", "", t("fleet.trend.utilisation.note")),
      kpi(t("fleet.trend.waste", { range: t("range." + range.name) }), "trend-waste", f.money(waste), trend.currency)),
    hours.length ? h("div", { class: "charts" },
      lineChart(series(t("fleet.trend.utilisation_series"), (x) => (x.utilisation_ratio === null ? null : x.utilisation_ratio * 100)),
        { ...opts, id: "trend-utilisation", title: t("fleet.trend.utilisation_chart"), unit: " %", max: 100, format: (v) => v.toFixed(0) }),
      lineChart(series(t("fleet.trend.waste_series"), (x) => x.idle_cost),
        { ...opts, id: "trend-waste", title: t("fleet.trend.waste_chart"), unit: ` ${trend.currency}`, format: (v) => v.toFixed(v < 10 ? 1 : 0) }))
      : h("p", { class: "muted" }, t("fleet.trend.none")));
}

export async function render({ summary: fleet, redraw }) {
  const nodes = dataTable(nodeSpec(fleet.currency), fleet.nodes);
  const range = rangeOf("fleet", "24h");
  const window = { start: fleet.now - range.seconds, end: fleet.now };
  // in parallel: the day's waste, the hourly trend and the first page's tiles
  const [today, trend] = await Promise.all([todayUsage(fleet.now, { limit: 1 }),
    getJSON(query("/v1/fleet/trend", window)), nodes.ready]);
  const summary = fleet.summary;
  const counts = STATES.map((key) => ({ key, label: t("state." + key), value: summary.gpus_by_state[key] || 0 }));
  return h("div", { class: "page" },
    h("h1", {}, t("fleet.title")),
    duplicates(fleet.duplicate_gpus || []),
    h("div", { class: "kpis" },
      kpi(t("fleet.gpus"), "gpus", f.int(counts.reduce((n, c) => n + c.value, 0))),
      kpi(t("fleet.utilisation"), "utilisation", f.pct(summary.utilisation_ratio), "", t("fleet.utilisation.note")),
      kpi(t("fleet.waste_now"), "waste-now", f.money(fleet.waste_per_hour), `${fleet.currency}/h`),
      kpi(t("fleet.waste_today"), "waste-today", f.money(today.usage.idle_cost), fleet.currency, t("fleet.waste_today.note")),
      kpi(t("fleet.power"), "power", f.kw(summary.power_watts), "kW")),
    h("section", { class: "card" },
      h("h2", {}, t("fleet.states")),
      stackBar(counts, "states"),
      h("ul", { class: "legend states" }, counts.map((c) =>
        h("li", {}, h("span", { class: `swatch glyph state-${c.key}` }), c.label, " ",
          h("strong", { "data-figure": "state-" + c.key }, f.int(c.value))))),
      h("p", { class: "muted small" }, t("fleet.bars"))),
    trendSection(trend, range, fleet.now, redraw),
    h("h2", {}, t("fleet.nodes"), " ", h("span", { class: "muted small", "data-figure": "nodes" }, f.int(fleet.nodes.length))),
    nodes);
}
