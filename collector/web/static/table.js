// One table for every list: sort (a header click), filters, search, pages ("50 of 623",
// all on demand), groups and CSV of the whole filtered list. Its state lives here, per
// table id, so the 15 s redraw keeps a table's sort, filters, search and page.
import { h } from "./dom.js";
import { t } from "./i18n.js";

export const PAGE_SIZE = 50;
const states = new Map();
const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

// natural order: gpu-node-2 before gpu-node-10; numbers before text, missing last
export function compare(a, b) {
  const none = (v) => v === null || v === undefined || v === "";
  if (none(a) || none(b)) return none(a) - none(b);
  if (typeof a === "number" && typeof b === "number") return a - b;
  return collator.compare(String(a), String(b));
}

export function stateOf(spec) {
  if (!states.has(spec.id)) {
    states.set(spec.id, { sort: spec.sort.key, dir: spec.sort.dir, filters: {}, search: "",
      page: 0, all: false, group: spec.groups ? spec.groups[0].key : "" });
  }
  return states.get(spec.id);
}

const sortValue = (column, row) => (column.value ? column.value(row) : null);

// the rows the state selects, sorted (grouped first when asked), and the page of them
export function select(spec, rows, state) {
  const needle = state.search.trim().toLowerCase();
  const matching = rows.filter((row) =>
    (spec.filters || []).every((f) => !state.filters[f.key] || f.value(row) === state.filters[f.key])
    && (!needle || (spec.search ? spec.search(row) : "").toLowerCase().includes(needle)));
  const column = spec.columns.find((c) => c.key === state.sort) || spec.columns.find((c) => c.key === spec.sort.key);
  const sign = state.dir === "asc" ? 1 : -1;
  const group = (spec.groups || []).find((g) => g.key === state.group && g.value);
  const sorted = matching.map((row, i) => ({ row, i })).sort((a, b) =>
    (group ? compare(group.value(a.row), group.value(b.row)) : 0)
    || sign * compare(sortValue(column, a.row), sortValue(column, b.row)) || a.i - b.i).map((x) => x.row);
  const size = spec.pageSize || PAGE_SIZE;
  const pages = Math.max(1, Math.ceil(sorted.length / size));
  state.page = Math.min(state.page, pages - 1);
  const shown = state.all ? sorted : sorted.slice(state.page * size, (state.page + 1) * size);
  return { matching: sorted, shown, pages, group };
}

function csvCell(value) {
  const text = value === null || value === undefined ? "" : String(value);
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

// every matching row, not only the page shown; a column's csv() (or its sort value)
export function csv(spec, rows) {
  const columns = spec.columns.filter((c) => c.csv || c.value);
  const lines = [columns.map((c) => csvCell(c.csvLabel || c.label)).join(",")];
  for (const row of rows) lines.push(columns.map((c) => csvCell((c.csv || c.value)(row))).join(","));
  return lines.join("\r\n") + "\r\n";
}

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }));
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function picker(spec, state, f, rows, redraw) {
  const values = [...new Set(rows.map(f.value).filter((v) => v !== "" && v !== null && v !== undefined))].sort(compare);
  const select = h("select", { id: `${spec.id}-filter-${f.key}`, "aria-label": f.label, "data-filter": f.key },
    h("option", { value: "" }, t("tbl.any", { what: f.label })),
    values.map((v) => h("option", { value: v }, f.text ? f.text(v) : v)));
  select.value = values.includes(state.filters[f.key]) ? state.filters[f.key] : "";
  select.addEventListener("change", () => { state.filters[f.key] = select.value; state.page = 0; redraw(); });
  return select;
}

function searchBox(spec, state, redraw) {
  let pending = null;
  const input = h("input", { type: "search", id: `${spec.id}-search`, placeholder: t("tbl.search"),
    "aria-label": t("tbl.search"), value: state.search, "data-search": spec.id });
  input.addEventListener("input", () => {
    clearTimeout(pending);
    pending = setTimeout(() => { state.search = input.value; state.page = 0; redraw(); }, 200);
  });
  return input;
}

function groupPicker(spec, state, redraw) {
  const select = h("select", { id: `${spec.id}-group`, "aria-label": t("tbl.group"), "data-group-by": spec.id },
    spec.groups.map((g) => h("option", { value: g.key }, g.label)));
  select.value = state.group;
  select.addEventListener("change", () => { state.group = select.value; state.page = 0; redraw(); });
  return h("label", { class: "picker" }, t("tbl.group"), " ", select);
}

// cards have no header to click: a sort picker instead
function sortPicker(spec, state, redraw) {
  const sortable = spec.columns.filter((c) => c.value);
  const select = h("select", { id: `${spec.id}-sort`, "aria-label": t("tbl.sort"), "data-sort-by": spec.id },
    sortable.map((c) => h("option", { value: c.key }, c.label)));
  select.value = state.sort;
  select.addEventListener("change", () => {
    state.sort = select.value;
    state.dir = sortable.find((c) => c.key === select.value).num ? "desc" : "asc";
    redraw();
  });
  return h("label", { class: "picker" }, t("tbl.sort"), " ", select);
}

function button(text, attrs, onclick) {
  return h("button", { type: "button", class: "quiet", ...attrs, onclick }, text);
}

function toolbar(spec, state, rows, chosen, redraw) {
  return h("div", { class: "dt-tools" },
    spec.search ? searchBox(spec, state, redraw) : null,
    (spec.filters || []).map((f) => picker(spec, state, f, rows, redraw)),
    spec.groups ? groupPicker(spec, state, redraw) : null,
    h("span", { class: spec.draw ? "" : "dt-phone" }, sortPicker(spec, state, redraw)),
    h("span", { class: "dt-count muted", "data-figure": `table-${spec.id}` },
      t("tbl.count", { shown: chosen.shown.length, total: chosen.matching.length })),
    rows.length !== chosen.matching.length
      ? h("span", { class: "muted small" }, t("tbl.filtered", { n: rows.length })) : null,
    button(t("tbl.csv"), { "data-csv": spec.id }, () => download(`${spec.id}.csv`, csv(spec, chosen.matching))));
}

function pager(spec, state, chosen, redraw) {
  if (chosen.pages <= 1 && !state.all) return null;
  const go = (change) => () => { Object.assign(state, change); redraw(); };
  return h("div", { class: "dt-pager" },
    state.all ? null : button(t("tbl.prev"), { disabled: state.page === 0, "data-page": "prev" }, go({ page: state.page - 1 })),
    state.all ? null : h("span", { class: "muted" }, t("tbl.page", { page: state.page + 1, pages: chosen.pages })),
    state.all ? null : button(t("tbl.next"), { disabled: state.page >= chosen.pages - 1, "data-page": "next" }, go({ page: state.page + 1 })),
    button(state.all ? t("tbl.paged") : t("tbl.all", { n: chosen.matching.length }), { "data-page": "all" }, go({ all: !state.all, page: 0 })));
}

function header(spec, state, redraw) {
  return h("tr", {}, spec.columns.map((c) => {
    const sorted = c.key === state.sort;
    const th = h("th", { class: c.num ? "num" : null, "aria-sort": sorted ? (state.dir === "asc" ? "ascending" : "descending") : null });
    if (!c.value) return th.append(c.label), th;
    th.append(button([c.label, sorted ? (state.dir === "asc" ? " ▲" : " ▼") : ""], { class: "dt-sort", "data-sort": c.key }, () => {
      state.dir = sorted && state.dir === "desc" ? "asc" : sorted ? "desc" : (c.num ? "desc" : "asc");
      state.sort = c.key;
      redraw();
    }));
    return th;
  }));
}

// each cell names its column: on a phone a row is a card of "label value" lines (CSS)
function labelled(spec, tr) {
  [...tr.children].forEach((td, i) => { if (spec.columns[i]?.label) td.dataset.label = spec.columns[i].label; });
  return tr;
}

// rows with a group's heading row before its first row
function body(spec, chosen) {
  const out = [];
  let last;
  for (const row of chosen.shown) {
    const name = chosen.group ? chosen.group.value(row) : undefined;
    if (chosen.group && name !== last) {
      const members = chosen.matching.filter((r) => chosen.group.value(r) === name);
      out.push(h("tr", { class: "dt-group", "data-group-row": name },
        h("th", { colspan: spec.columns.length }, chosen.group.text ? chosen.group.text(name, members) : name)));
      last = name;
    }
    out.push(labelled(spec, spec.row(row)));
  }
  return out;
}

// spec: {id, columns: [{key, label, num, value(row), csv(row)}], row(r) -> <tr>, sort: {key, dir},
// filters: [{key, label, value(row), text(v)}], search(row) -> text, groups: [{key, label, value(row), text(name, rows)}],
// pageSize, draw(shown, chosen) -> Node (instead of a <table>: the fleet's node cards), empty}
export function dataTable(spec, rows) {
  const state = stateOf(spec);
  const root = h("div", { class: "dt", "data-dt": spec.id });
  const redraw = async () => {
    const chosen = select(spec, rows, state);
    const content = spec.draw ? await spec.draw(chosen.shown, chosen)
      : h("div", { class: "table-wrap", tabindex: "0", "data-scroll": spec.id }, h("table", { "data-table": spec.id },
        h("thead", {}, header(spec, state, redraw)), h("tbody", {}, body(spec, chosen))));
    const focused = document.activeElement && root.contains(document.activeElement) ? document.activeElement.id : null;
    const parts = [toolbar(spec, state, rows, chosen, redraw),
      chosen.matching.length || !spec.empty ? content : h("p", { class: "muted" }, spec.empty),
      pager(spec, state, chosen, redraw)];
    root.replaceChildren(...parts.filter(Boolean));
    const again = focused && document.getElementById(focused);
    if (again) {
      again.focus(); // typing in the search box goes on where it was
      if (again.type === "search") again.setSelectionRange(again.value.length, again.value.length);
    }
  };
  root.ready = redraw();
  return root;
}
