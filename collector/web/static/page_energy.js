// Energy and carbon by namespace, team and owner (and the unallocated rest), over a window.
import { getJSON, query } from "./api.js";
import { barChart } from "./charts.js";
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";
import { workloadHref } from "./page_fleet.js";
import { dataTable } from "./table.js";

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
  const u = (field) => (r) => r.usage[field];
  return dataTable({
    id, sort: { key: "kwh", dir: "desc" },
    columns: [{ key: "name", label: t(`col.${id}`), value: (r) => r.name },
      { key: "kwh", label: `${t("col.energy")} (kWh)`, num: true, value: (r) => r.usage.energy_joules / 3.6e6 },
      { key: "share", label: t("col.share"), num: true, value: (r) => (total ? r.usage.energy_joules / total : 0) },
      { key: "kg", label: `${t("col.carbon")} (kgCO2e)`, num: true, value: (r) => r.usage.carbon_grams / 1000 },
      { key: "cost", label: `${t("col.cost")} (${cur})`, num: true, value: u("cost") },
      { key: "idle_cost", label: `${t("col.idle_cost")} (${cur})`, num: true, value: u("idle_cost") }],
    search: (r) => r.name,
    row: (r) => h("tr", { "data-group": r.name },
      h("td", { translate: r.muted ? null : "no" }, r.name), h("td", { class: "num", "data-col": "kwh" }, f.kwh(r.usage.energy_joules)),
      h("td", { class: "num" }, f.pct(total ? r.usage.energy_joules / total : 0)),
      h("td", { class: "num", "data-col": "kg" }, f.kg(r.usage.carbon_grams)),
      h("td", { class: "num" }, f.money(r.usage.cost)), h("td", { class: "num", "data-col": "idle-cost" }, f.money(r.usage.idle_cost))),
  }, rows);
}

// every workload, the most idle cost first (the top 50 by energy hid exactly the idle ones)
function workloadTable(workloads, cur) {
  const u = (field) => (w) => w.usage[field];
  return dataTable({
    id: "workloads", sort: { key: "idle_cost", dir: "desc" },
    columns: [{ key: "key", label: t("col.workload"), value: (w) => w.key },
      { key: "namespace", label: t("col.namespace"), value: (w) => w.namespace },
      { key: "team", label: t("col.team"), value: (w) => w.team },
      { key: "owner", label: t("col.owner"), value: (w) => w.owner },
      { key: "kwh", label: `${t("col.energy")} (kWh)`, num: true, value: (w) => w.usage.energy_joules / 3.6e6 },
      { key: "kg", label: `${t("col.carbon")} (kgCO2e)`, num: true, value: (w) => w.usage.carbon_grams / 1000 },
      { key: "idle_cost", label: `${t("col.idle_cost")} (${cur})`, num: true, value: u("idle_cost") },
      { key: "episodes", label: t("col.episodes"), num: true, value: (w) => w.idle_episodes }],
    filters: [{ key: "namespace", label: t("col.namespace"), value: (w) => w.namespace },
      { key: "team", label: t("col.team"), value: (w) => w.team },
      { key: "owner", label: t("col.owner"), value: (w) => w.owner }],
    search: (w) => [w.key, w.namespace, w.team, w.user, w.owner].join(" "),
    row: (w) => h("tr", { "data-workload": w.key },
      h("td", { translate: "no" }, h("a", { href: workloadHref(w.key) }, w.key)), h("td", { translate: "no" }, w.namespace),
      h("td", { translate: "no" }, w.team), h("td", { translate: "no", "data-col": "owner" }, w.owner),
      h("td", { class: "num" }, f.kwh(w.usage.energy_joules)),
      h("td", { class: "num" }, f.kg(w.usage.carbon_grams)), h("td", { class: "num", "data-col": "idle-cost" }, f.money(w.usage.idle_cost)),
      h("td", { class: "num" }, f.int(w.idle_episodes))),
  }, workloads);
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
    // one under the other: side by side at 1280 px they cut the idle-cost column
    h("section", {}, h("h2", {}, t("en.by_namespace")), groupTable(namespaces, "namespace", cur, total.energy_joules)),
    h("section", {}, h("h2", {}, t("en.by_team")), groupTable(teams, "team", cur, total.energy_joules)),
    h("section", {}, h("h2", {}, t("en.by_owner")), groupTable(owners, "owner", cur, total.energy_joules)),
    h("h2", {}, t("en.workloads")), workloadTable(answer.workloads, cur));
}
