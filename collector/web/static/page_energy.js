// Energy and carbon by namespace, team and owner (and the unallocated rest), over a window.
import { getJSON, query } from "./api.js";
import { barChart } from "./charts.js";
import { h, kpi, table } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";
import { workloadHref } from "./page_fleet.js";

const WINDOWS = { today: "en.today", day: "en.day", week: "en.week" };
const FIELDS = ["energy_joules", "carbon_grams", "cost", "idle_cost"];

function windowStart(name, now) {
  if (name === "day") return now - 86400;
  if (name === "week") return now - 7 * 86400;
  return f.startOfDay(now);
}

function add(into, usage) {
  for (const field of FIELDS) into[field] = (into[field] || 0) + usage[field];
  return into;
}

function group(workloads, field) {
  const groups = new Map();
  for (const w of workloads) {
    const name = w[field] || t("none");
    groups.set(name, add(groups.get(name) || {}, w.usage));
  }
  return [...groups].map(([name, usage]) => ({ name, usage }));
}

function rest(fleetTotal, workloads) {
  const held = workloads.reduce((sum, w) => add(sum, w.usage), {});
  const usage = {};
  for (const field of FIELDS) usage[field] = Math.max(0, (fleetTotal[field] || 0) - (held[field] || 0));
  return { name: t("unallocated"), usage, muted: true };
}

function groupTable(rows, id, cur, total) {
  const columns = [{ label: t(`col.${id}`) },
    { label: `${t("col.energy")} (kWh)`, num: true }, { label: t("col.share"), num: true },
    { label: `${t("col.carbon")} (kgCO2e)`, num: true }, { label: `${t("col.cost")} (${cur})`, num: true },
    { label: `${t("col.idle_cost")} (${cur})`, num: true }];
  return table(columns, rows.map((r) => h("tr", { "data-group": r.name },
    h("td", {}, r.name), h("td", { class: "num", "data-col": "kwh" }, f.kwh(r.usage.energy_joules)),
    h("td", { class: "num" }, f.pct(total ? r.usage.energy_joules / total : 0)),
    h("td", { class: "num", "data-col": "kg" }, f.kg(r.usage.carbon_grams)),
    h("td", { class: "num" }, f.money(r.usage.cost)), h("td", { class: "num" }, f.money(r.usage.idle_cost)))),
  { "data-table": id });
}

function workloadTable(workloads) {
  const columns = [{ label: t("col.workload") }, { label: t("col.namespace") }, { label: t("col.team") },
    { label: t("col.owner") }, { label: `${t("col.energy")} (kWh)`, num: true }, { label: `${t("col.carbon")} (kgCO2e)`, num: true },
    { label: t("col.episodes"), num: true }];
  const top = [...workloads].sort((a, b) => b.usage.energy_joules - a.usage.energy_joules).slice(0, 50);
  return table(columns, top.map((w) => h("tr", { "data-workload": w.key },
    h("td", {}, h("a", { href: workloadHref(w.key) }, w.key)), h("td", {}, w.namespace), h("td", {}, w.team),
    h("td", { "data-col": "owner" }, w.owner), h("td", { class: "num" }, f.kwh(w.usage.energy_joules)), h("td", { class: "num" }, f.kg(w.usage.carbon_grams)),
    h("td", { class: "num" }, f.int(w.idle_episodes)))), { "data-table": "workloads" });
}

function picker(current) {
  const select = h("select", { id: "window", "aria-label": t("en.window") },
    Object.entries(WINDOWS).map(([value, label]) => h("option", { value }, t(label))));
  select.value = current;
  select.addEventListener("change", () => { location.search = "?window=" + select.value; });
  return h("label", { class: "picker" }, t("en.window"), " ", select);
}

export async function render({ summary, params }) {
  const name = params.get("window") in WINDOWS ? params.get("window") : "today";
  const start = windowStart(name, summary.now);
  const range = { start, end: Math.max(summary.now, start + 1) };
  // limit=1: the fleet's usage summed on the server, not every GPU's
  const [answer, usage] = await Promise.all([
    getJSON(query("/v1/workloads", range)), getJSON(query("/v1/gpus/usage", { ...range, limit: 1 }))]);
  const total = add({}, usage.usage);
  const cur = usage.currency;
  const other = rest(total, answer.workloads);
  const namespaces = [...group(answer.workloads, "namespace"), other].sort((a, b) => b.usage.energy_joules - a.usage.energy_joules);
  const teams = [...group(answer.workloads, "team"), other].sort((a, b) => b.usage.energy_joules - a.usage.energy_joules);
  const owners = [...group(answer.workloads, "owner"), other].sort((a, b) => b.usage.energy_joules - a.usage.energy_joules);
  const bars = namespaces.map((r) => ({ label: r.name, value: r.usage.energy_joules, text: f.kwh(r.usage.energy_joules) + " kWh", muted: r.muted }));
  return h("div", { class: "page" },
    h("div", { class: "title-row" }, h("h1", {}, t("en.title")), picker(name)),
    h("div", { class: "kpis" },
      kpi(t("en.energy"), "energy", f.kwh(total.energy_joules || 0), "kWh"),
      kpi(t("en.carbon"), "carbon", f.kg(total.carbon_grams || 0), "kgCO2e"),
      kpi(t("en.cost"), "cost", f.money(total.cost || 0), cur),
      kpi(t("en.waste"), "waste", f.money(total.idle_cost || 0), cur)),
    h("section", { class: "card" }, barChart(bars, { id: "namespaces", title: t("en.by_namespace") + " (kWh)" })),
    h("div", { class: "two" },
      h("section", {}, h("h2", {}, t("en.by_namespace")), groupTable(namespaces, "namespace", cur, total.energy_joules)),
      h("section", {}, h("h2", {}, t("en.by_team")), groupTable(teams, "team", cur, total.energy_joules))),
    h("section", {}, h("h2", {}, t("en.by_owner")), groupTable(owners, "owner", cur, total.energy_joules)),
    h("h2", {}, t("en.workloads")), workloadTable(answer.workloads));
}
