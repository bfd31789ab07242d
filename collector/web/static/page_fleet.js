// Fleet: the KPIs and state bar from /v1/fleet/summary, one card per node (most waste
// first), and tiles for the first nodes only, more on demand: no page downloads every GPU.
import { getJSON, query } from "./api.js";
import { stackBar } from "./charts.js";
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";

export const STATES = ["active", "allocated_idle", "unallocated", "unknown"];
export const WASTING_STATES = "allocated_idle,unallocated";
// nodes whose tiles are drawn at first (and added per "show more"): ~200 GPUs
export const NODES_PER_PAGE = 24;
const PAGE_LIMIT = 1000; // the most GPUs /v1/fleet answers per page
let shownNodes = NODES_PER_PAGE; // kept across the 15 s redraws

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
  const idle = STATES.filter((s) => wasting({ state: s })).reduce((n, s) => n + node.gpus_by_state[s], 0);
  return h("section", { class: "node", "data-node": node.node },
    h("header", {}, h("strong", {}, node.node), h("span", { class: "muted" }, `${node.models.join(", ")} · ${node.gpus} GPU`),
      idle ? h("span", { class: "badge" }, t("fleet.idle_gpus", { n: idle })) : null),
    h("div", { class: "tiles" }, (gpus || []).map(tile)));
}

// the cards of `nodes`, with their tiles fetched in one go (a page per 1,000 GPUs)
async function nodeCards(nodes) {
  if (!nodes.length) return [];
  const gpus = await fleetGpus({ node: nodes.map((n) => n.node).join(",") });
  const byNode = new Map(nodes.map((n) => [n.node, []]));
  for (const gpu of gpus) byNode.get(gpu.node)?.push(gpu);
  return nodes.map((n) => nodeCard(n, byNode.get(n.node)));
}

function moreButton(nodes, grid) {
  const left = nodes.length - shownNodes;
  if (left <= 0) return null;
  const button = h("button", { type: "button", class: "quiet", "data-more": "nodes" },
    t("fleet.more", { n: Math.min(left, NODES_PER_PAGE), left }));
  button.addEventListener("click", async () => {
    button.disabled = true;
    const next = nodes.slice(shownNodes, shownNodes + NODES_PER_PAGE);
    grid.append(...(await nodeCards(next)));
    shownNodes += next.length;
    const again = moreButton(nodes, grid);
    button.replaceWith(again || "");
  });
  return button;
}

// a GPU uuid a second node claims (a cloned VM image): its batches are refused, say so loudly
function duplicates(found) {
  if (!found.length) return null;
  return h("section", { class: "card alert", "data-figure": "duplicate-gpus" },
    h("h2", {}, t("fleet.duplicates")),
    h("ul", {}, found.map((d) => h("li", { "data-uuid": d.uuid },
      t("fleet.duplicate", { uuid: d.uuid, node: d.node, by: d.claimed_by, n: f.int(d.batches_refused) })))));
}

export async function render({ summary: fleet }) {
  const [today, cards] = await Promise.all([todayUsage(fleet.now, { limit: 1 }),
    nodeCards(fleet.nodes.slice(0, shownNodes))]);
  const summary = fleet.summary;
  const counts = STATES.map((key) => ({ key, label: t("state." + key), value: summary.gpus_by_state[key] || 0 }));
  const grid = h("div", { class: "nodes" }, cards);
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
        h("li", {}, h("span", { class: `swatch state-${c.key}` }), c.label, " ",
          h("strong", { "data-figure": "state-" + c.key }, f.int(c.value)))))),
    h("h2", {}, t("fleet.nodes"), " ", h("span", { class: "muted small", "data-figure": "nodes" }, f.int(fleet.nodes.length))),
    grid,
    moreButton(fleet.nodes, grid));
}
