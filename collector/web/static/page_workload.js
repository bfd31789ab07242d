// One workload: its GPUs' activity, memory and power over the last hours; energy, carbon, idle.
import { getJSON, query } from "./api.js";
import { lineChart, rangeOf, rangePicker } from "./charts.js";
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";
import { fleetGpus } from "./page_fleet.js";

//: the windows the per-minute series cover (collector/web/series.py keeps 6 h)
const WINDOWS = ["1h", "6h"];
const CHARTS = [
  { id: "activity", title: "wl.activity", unit: " %", max: 100, value: (p) => (p.sm_activity === null ? null : p.sm_activity * 100), format: (v) => v.toFixed(0) },
  { id: "memory", title: "wl.memory", unit: " GiB", value: (p) => (p.memory_used_bytes === null ? null : p.memory_used_bytes / 2 ** 30), format: (v) => v.toFixed(1) },
  { id: "power", title: "wl.power", unit: " W", value: (p) => p.power_watts, format: (v) => v.toFixed(0) },
];

function facts(report) {
  // the kind in words ("Kubernetes pod"); the names are data
  const kind = t("wkind." + report.kind) === "wkind." + report.kind ? report.kind : t("wkind." + report.kind);
  const rows = [["wl.kind", kind, null], ["wl.namespace", report.namespace, "no"], ["wl.team", report.team, "no"],
    ["wl.user", report.user, "no"], ["wl.owner", report.owner, "no"], ["wl.models", report.gpu_models.join(", "), "no"]];
  return h("dl", { class: "facts" }, rows.filter(([, v]) => v).map(([k, v, raw]) =>
    h("div", {}, h("dt", {}, t(k)), h("dd", { translate: raw }, v))));
}

// on shared GPUs: the part of them it holds, and how long it has used none of it
function sharedKpis(gpus, key, now) {
  const parts = gpus.filter((g) => g.holder_fractions && key in g.holder_fractions);
  if (!parts.length) return [];
  const held = parts.reduce((sum, g) => sum + g.holder_fractions[key], 0);
  const since = parts.map((g) => g.holders_idle_since[key]);
  const idle = since.every((s) => s !== undefined) ? now - Math.max(...since) : 0;
  return [kpi(t("wl.share"), "gpu-share", f.pct(held / parts.length), "", t("wl.share_of", { n: parts.length })),
    kpi(t("wl.idle_own"), "idle-own", f.duration(idle))];
}

async function charts(gpus, now, seconds) {
  const start = now - seconds;
  const answers = await Promise.all(gpus.map((g) =>
    getJSON(query(`/v1/gpus/${encodeURIComponent(g.uuid)}/series`, { start, end: now + 1 }))));
  const gap = 2.5 * (answers[0] ? answers[0].resolution_seconds : 60);
  const first = Math.min(...answers.flatMap((a) => a.points.slice(0, 1).map((p) => p.start)));
  const from = Number.isFinite(first) ? Math.max(start, first) : start;
  return CHARTS.map((c) => lineChart(
    gpus.map((g, i) => ({ name: f.gpuLabel(g), points: answers[i].points.map((p) => ({ t: p.start, v: c.value(p) })) })),
    { id: c.id, title: t(c.title), unit: c.unit, max: c.max, format: c.format, tStart: from, tEnd: now, gap }));
}

// its KPIs and its charts over one window: 1 h or 6 h
export async function render({ summary, params, redraw }) {
  const key = params.get("key") || "";
  const now = summary.now;
  const range = rangeOf("workload", "6h", WINDOWS);
  const [answer, gpus] = await Promise.all([
    getJSON(query("/v1/workloads", { start: now - range.seconds, end: now })),
    key ? fleetGpus({ workload: key }) : []]); // the GPUs it holds, filtered on the server
  const report = answer.workloads.find((w) => w.key === key);
  const head = h("div", { class: "title-row" },
    h("h1", {}, t("wl.title"), " ", h("code", { "data-figure": "workload-key", translate: "no" }, key)),
    rangePicker("workload", range.name, redraw, WINDOWS));
  const when = t("range." + range.name);
  if (!report) return h("div", { class: "page" }, head, h("p", { class: "muted" }, t("wl.missing_in", { range: when })));
  const u = report.usage;
  return h("div", { class: "page" }, head, facts(report),
    h("p", { class: "muted small" }, t("wl.window_in", { range: when })),
    h("div", { class: "kpis" },
      kpi(t("wl.energy"), "energy", f.kwh(u.energy_joules), "kWh"),
      kpi(t("wl.carbon"), "carbon", f.kg(u.carbon_grams), "kgCO2e"),
      kpi(t("wl.cost"), "cost", f.money(u.cost), report.currency),
      kpi(t("wl.idle_cost"), "idle-cost", f.money(u.idle_cost), report.currency),
      kpi(t("wl.episodes"), "episodes", f.int(report.idle_episodes), "", `${t("wl.longest")}: ${f.duration(report.longest_idle_seconds)}`),
      kpi(t("wl.gpus_now"), "gpus-now", f.int(gpus.length)),
      ...sharedKpis(gpus, key, now)),
    h("h2", {}, t("wl.charts")),
    gpus.length ? h("div", { class: "charts" }, await charts(gpus, now, range.seconds)) : h("p", { class: "muted" }, t("wl.no_gpus")));
}
