// Plans: what the fleet's GPUs cost over the pricing look-back under today's mix of plans,
// the cheapest mix, all on demand and all reserved (and with idle GPU-hours removed), and
// the utilisation gap to the target with what the open recommendations would close.
import { getJSON, query } from "./api.js";
import { h, kpi, table } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";

const LOOKBACK_SECONDS = 30 * 86400;
const SCENARIOS = ["today", "recommended", "all_on_demand", "all_reserved"];

export function mixWords(mix, gpus) {
  if (mix.plan === "on_demand" || mix.reserved_gpus === 0) return t("plans.all_on_demand_n", { n: gpus });
  return t("plans.mix", { r: mix.reserved_gpus, plan: t("plan." + mix.plan), rest: gpus - mix.reserved_gpus });
}

// money columns carry no currency: the window line above the table names it once
function poolTable(report) {
  const columns = [{ label: t("plans.pool") }, { label: t("plans.gpus"), num: true },
    { label: t("plans.today") }, { label: t("plans.cheapest") },
    ...SCENARIOS.map((s) => ({ label: t("plans.cost." + s), num: true })),
    { label: t("plans.idle_removed"), num: true }, { label: t("plans.risk"), num: true }];
  const rows = report.rows.map((r) => h("tr", { "data-pool": r.subject },
    h("td", { translate: "no" }, r.subject), h("td", { class: "num" }, f.int(r.gpu_count)),
    h("td", {}, mixWords(r.today, r.gpu_count)), h("td", {}, mixWords(r.recommended, r.gpu_count)),
    SCENARIOS.map((s) => h("td", { class: "num", "data-col": s }, f.money(r.costs[s]))),
    h("td", { class: "num" }, f.money(r.costs_idle_removed.recommended)),
    h("td", { class: "num" }, f.money(r.saving_if_usage_drops))));
  rows.push(h("tr", { "data-pool": "total" }, h("td", {}, t("plans.total")), h("td", {}), h("td", {}), h("td", {}),
    SCENARIOS.map((s) => h("td", { class: "num", "data-col": s }, f.money(report.total[s]))),
    h("td", { class: "num" }, f.money(report.total_idle_removed.recommended)), h("td", {})));
  return table(columns, rows, { "data-table": "plans" });
}

function utilisation(util) {
  if (util.actual === null) return h("p", { class: "muted" }, t("plans.util.none"));
  // the kind in words and the subject from the id ("scale_down:gpu-node-7"): the title is English
  const items = util.closing.map((c) => {
    const [kind, ...subject] = c.id.split(":");
    return h("li", { "data-rec": c.id, title: c.title }, t("kind." + kind), " ",
      h("span", { translate: "no" }, subject.join(":")), ": ", t("plans.util.to", { after: f.pct(c.utilisation_after) }));
  });
  return h("section", { class: "card" },
    h("h2", {}, t("plans.util.title")),
    h("p", { "data-figure": "utilisation-gap" }, t("plans.util.gap", {
      actual: f.pct(util.actual), target: f.pct(util.target), gap: f.pct(Math.max(0, util.gap)) })),
    items.length ? h("ul", {}, items) : h("p", { class: "muted" }, t("plans.util.nothing")),
    items.length ? h("p", {}, t("plans.util.after_all", { after: f.pct(util.after_all) })) : null);
}

export async function render({ summary }) {
  const report = await getJSON(query("/v1/plans", { start: summary.now - LOOKBACK_SECONDS, end: summary.now }));
  const cur = report.currency;
  const total = report.total;
  return h("div", { class: "page" },
    h("h1", {}, t("plans.title")),
    h("p", { class: "muted" }, t("plans.window", { start: f.stamp(report.start), end: f.stamp(report.end), cur,
      hours: f.int(Math.max(0, ...report.rows.map((r) => r.hours))) })),
    h("div", { class: "kpis" },
      kpi(t("plans.cost.today"), "cost-today", f.money(total.today), cur),
      kpi(t("plans.cost.recommended"), "cost-recommended", f.money(total.recommended), cur),
      kpi(t("plans.saving"), "saving", f.money(total.today - total.recommended), cur),
      kpi(t("plans.saving_idle"), "saving-idle",
        f.money(report.total_idle_removed.today - report.total_idle_removed.recommended), cur)),
    report.rows.length ? poolTable(report) : h("p", { class: "muted" }, t("plans.none")),
    h("p", { class: "muted" }, t("plans.assumption")),
    utilisation(report.utilisation));
}
