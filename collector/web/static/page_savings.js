// Savings: what the releases of the last 7 days freed (GET /v1/savings): per release, the
// GPU-hours its GPUs were not held idle by anyone afterwards, and the money and energy
// not spent (collector/analysis/savings.py gives the rule).
import { getJSON, query } from "./api.js";
import { h, kpi, table } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";

const WINDOW_SECONDS = 7 * 86400;

function releases(report) {
  const columns = [{ label: t("savings.workload") }, { label: t("savings.released_at") },
    { label: t("savings.by") }, { label: t("savings.gpus"), num: true },
    { label: t("savings.freed"), num: true }, { label: t("savings.money"), num: true },
    { label: t("savings.energy"), num: true }];
  const rows = report.releases.map((r) => h("tr", { "data-workload": r.workload_key },
    h("td", { translate: "no" }, r.workload_key), h("td", {}, f.stamp(r.released_at)), h("td", {}, t("savings.by." + r.by)),
    h("td", { class: "num" }, f.int(r.gpus)), h("td", { class: "num" }, r.freed_gpu_hours.toFixed(2)),
    h("td", { class: "num" }, f.money(r.money)), h("td", { class: "num" }, r.energy_kwh.toFixed(2))));
  return table(columns, rows, { "data-table": "savings" });
}

export async function render({ summary }) {
  const report = await getJSON(query("/v1/savings", { start: summary.now - WINDOW_SECONDS, end: summary.now }));
  const cur = report.currency;
  return h("div", { class: "page" },
    h("h1", {}, t("savings.title")),
    // in the page's language, not the server's English sentence (report.summary)
    h("p", { "data-figure": "savings-summary" }, t("savings.summary_line", {
      hours: report.released_gpu_hours.toFixed(2), money: f.money(report.money), cur, kwh: report.energy_kwh.toFixed(2) })),
    h("div", { class: "kpis" },
      kpi(t("savings.freed"), "freed-gpu-hours", report.released_gpu_hours.toFixed(2), "h"),
      kpi(t("savings.money"), "money", f.money(report.money), cur),
      kpi(t("savings.energy"), "energy", report.energy_kwh.toFixed(2), "kWh")),
    report.releases.length ? releases(report) : h("p", { class: "muted" }, t("savings.none")),
    h("p", { class: "muted" }, t("savings.rule")));
}
