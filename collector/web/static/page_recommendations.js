// Recommendations: kind, subject, evidence, how long it was seen (and the confidence that
// gives), savings per month (money, kWh, kgCO2e), grouped by kind or owner; dismiss after a
// confirmation, with an Undo for some seconds (POST .../restore).
import { getJSON, postJSON, query } from "./api.js";
import { h, kpi } from "./dom.js";
import * as f from "./format.js";
import { lang, t } from "./i18n.js";
import { workloadHref } from "./page_fleet.js";
import { dataTable } from "./table.js";

//: how long the Undo of a dismissal stays on screen
export const UNDO_SECONDS = 10;

const LIVE = new Set(["open", "notified"]);

// an evidence key in words ("Idle for", "Price per hour"); a key the catalogue lacks, spaced
function evidenceLabel(name) {
  const key = "ev." + name;
  const text = t(key);
  return text === key ? name.replaceAll("_", " ") : text;
}

const RATIOS = new Set(["break_even", "margin", "usage_drop", "sm_activity_peak", "headroom"]);
const UUID = /^(GPU|MIG)-/;

function evidenceValue(name, value, cur) {
  if (typeof value === "boolean") return t(value ? "yes" : "no");
  if (typeof value === "number" && name.endsWith("_seconds")) return f.duration(value);
  if (typeof value === "number" && name.endsWith("_since")) return f.stamp(value);
  if (typeof value === "number" && name.endsWith("_bytes")) return f.gib(value) + " GiB";
  if (typeof value === "number" && name.endsWith("_watts")) return f.watts(value) + " W";
  if (typeof value === "number" && name.startsWith("price_per")) return `${f.money(value)} ${cur}/h`;
  if (typeof value === "number" && RATIOS.has(name)) return f.pct(value);
  if (typeof value === "number" && name.endsWith("_per_hour")) return `${f.money(value)} ${cur}/h`;
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(2);
  if (Array.isArray(value) && name === "moves") return value.map(move).join("; ");
  // GPU uuids are for the tooltip, not six wrapped lines: "3 GPUs"
  if (Array.isArray(value) && value.length && value.every((v) => UUID.test(String(v)))) return t("ev.gpu_list", { n: value.length });
  if (Array.isArray(value)) return value.length > 3 ? `${value.slice(0, 3).join(", ")} … (${value.length})` : value.join(", ");
  if (isMoneyMap(value)) return Object.entries(value).map(([k, v]) => `${named("cond." + k, k)} ${f.money(v)} ${cur}/h`).join(", ");
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

// {"xid": 6.88, "off_bus": 3.43} or {"pod:ml/x": 6.88}: money per hour by condition or workload
function isMoneyMap(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.values(value).every((v) => typeof v === "number");
}

// a catalogue entry, else the fallback (a workload key is its own name)
function named(key, fallback) {
  const text = t(key);
  return text === key ? fallback : text;
}

// a bottleneck's verdicts: each likely cause, the money it leaves unused and what to try
function verdicts(rec) {
  if (rec.kind !== "bottleneck" || !Array.isArray(rec.evidence.verdicts)) return null;
  const cur = rec.savings.currency;
  return h("ul", { class: "verdicts small" }, rec.evidence.verdicts.map((v) =>
    h("li", { "data-cause": v.cause, title: v.reason },
      t("rec.verdict", { cause: named("cause." + v.cause, v.cause), money: f.money(v.money_per_hour), cur, advice: named("advice." + v.cause, v.advice) }))));
}

// one consolidate move: "2 × H100 slurm:42 → gpu-node-03"
function move(m) {
  return `${m.gpus} × ${m.model} ${m.workloads.join(" + ")} → ${m.to_node}`;
}

function tooltip(value) {
  if (!Array.isArray(value)) return null;
  return value.map((v) => (typeof v === "object" && v !== null ? JSON.stringify(v) : String(v))).join("\n");
}

// names (nodes, workloads, models) are data, not words to translate; a GPU list is "3 GPUs"
const isData = (value) => typeof value === "string" || typeof value === "object" && value !== null
  && !(Array.isArray(value) && value.length && value.every((v) => UUID.test(String(v))));

function evidence(rec) {
  return h("dl", { class: "evidence" }, Object.entries(rec.evidence).slice(0, 7).map(([name, value]) =>
    h("div", {}, h("dt", {}, evidenceLabel(name)), h("dd", { title: tooltip(value), translate: isData(value) ? "no" : null },
      evidenceValue(name, value, rec.savings.currency)))));
}

// a month extrapolated from a short window is the top of a range: say both ends
function range(s) {
  return t("rec.range", { low: f.money0(s.money_per_month_low), high: f.money0(s.money_per_month), cur: s.currency });
}

const recPath = (rec, verb) => `/v1/recommendations/${encodeURIComponent(rec.id)}/${verb}`;
// who acts on it: its workload's owner ("PyTorchJob llm-pretrain", the top of the pod's owner
// chain), else the namespace (or Slurm account) of its workload, else its node
export function owner(rec) {
  if (rec.owner) {
    const [kind, ...rest] = rec.owner.split("/");
    return `${kind} ${rest[rest.length - 1]}`;
  }
  return rec.namespace || rec.node || t("none");
}
export const team = (rec) => rec.team || t("none");

// the owner, and under it the team and user: "PyTorchJob llm-pretrain / nlp · alice"
function ownerCell(rec) {
  const who = [rec.team, rec.user].filter(Boolean).join(" · ");
  return h("td", { translate: "no", "data-col": "owner", title: rec.owner || null }, owner(rec),
    who ? h("div", { class: "muted small", "data-team": rec.team }, who) : null);
}

// the command that frees the GPUs (as the chat messages give it), with a copy button
function commandLine(rec) {
  if (!rec.command) return null;
  const copy = h("button", { type: "button", class: "quiet small", "data-copy": rec.id }, t("rec.copy"));
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(rec.command);
      copy.textContent = t("rec.copied");
    } catch {  // no clipboard (plain http): select it for Ctrl+C
      getSelection().selectAllChildren(code);
    }
  });
  const code = h("code", { class: "cmd", translate: "no", "data-command": rec.id }, rec.command);
  return h("div", { class: "cmd-line" }, code, " ", copy);
}

// the title in the reader's language: the collector's English sentence, else one made of the
// recommendation's own figures by kind (the English stays in the tooltip)
function title(rec) {
  if (lang() === "en") return rec.title;
  const ev = rec.evidence, s = rec.savings;
  const gpus = Array.isArray(ev.gpus) ? ev.gpus.length : rec.gpu_uuids.length;
  const [before, after] = t("title." + rec.kind, {
    subject: "\u0000", n: ev.freed_gpus ?? gpus, money: f.money(s.money_per_hour), cur: s.currency,
    month: f.money0(s.money_per_month), current: ev.current ?? "", target: ev.target ?? "",
  }).split("\u0000");
  // the subject (a workload, node or model name) is data, not a word to translate
  return after === undefined ? before : [before, h("span", { translate: "no" }, rec.subject), after];
}

// a toast outside the page, so the 15 s redraw keeps it: "Dismissed X. Undo"
function undoToast(rec, redraw) {
  const toast = document.getElementById("toast");
  let left = UNDO_SECONDS;
  const count = h("span", { class: "muted" }, t("rec.undo_in", { n: left }));
  const undo = h("button", { type: "button", "data-undo": rec.id }, t("rec.undo"));
  const item = h("div", { class: "toast", "data-toast": rec.id }, t("rec.dismissed", { subject: rec.subject }), " ", undo, " ", count);
  const tick = setInterval(() => {
    left -= 1;
    count.textContent = t("rec.undo_in", { n: left });
    if (left <= 0) { clearInterval(tick); item.remove(); }
  }, 1000);
  undo.addEventListener("click", async () => {
    undo.disabled = true;
    clearInterval(tick);
    try {
      await postJSON(recPath(rec, "restore"));
      item.replaceChildren(t("rec.restored", { subject: rec.subject }));
      setTimeout(() => item.remove(), 3000);
    } catch (err) {
      item.replaceChildren(h("span", { class: "error" }, t("rec.failed", { why: err.message })));
      setTimeout(() => item.remove(), 3 * UNDO_SECONDS * 1000);
    }
    await redraw();
  });
  toast.append(item);
}

// Dismiss -> "Dismiss? [Yes, dismiss] [Cancel]" -> the POST, then the Undo toast
function dismissCell(rec, redraw) {
  const cell = h("td", { "data-col": "action" });
  const ask = () => cell.replaceChildren(
    h("span", { class: "small" }, t("rec.confirm")), " ",
    h("button", { type: "button", "data-confirm": rec.id, onclick: confirm }, t("rec.confirm_yes")), " ",
    h("button", { type: "button", class: "quiet", "data-cancel": rec.id, onclick: idle }, t("rec.cancel")));
  const idle = () => cell.replaceChildren(
    h("button", { type: "button", class: "quiet", onclick: ask, "data-dismiss": rec.id }, t("rec.dismiss")));
  const confirm = async (event) => {
    event.target.disabled = true;
    try {
      await postJSON(recPath(rec, "dismiss"));
    } catch (err) {
      cell.replaceChildren(h("span", { class: "error", "data-error": rec.id }, t("rec.failed", { why: err.message })));
      return;
    }
    undoToast(rec, redraw);
    await redraw();
  };
  if (LIVE.has(rec.status)) idle();
  return cell;
}

function row(rec, redraw) {
  const subject = h(rec.workload_key ? "a" : "span", { href: rec.workload_key ? workloadHref(rec.workload_key) : null,
    translate: "no", title: rec.title }, rec.subject);
  return h("tr", { "data-rec": rec.id, "data-status": rec.status },
    h("td", {}, h("span", { class: `kind kind-${rec.kind}` }, t("kind." + rec.kind))),
    h("td", {}, subject, h("div", { class: "muted small", "data-title": rec.id, title: rec.title,
      // the collector's own sentence in English is data; another language's is the catalogue's
      translate: lang() === "en" ? "no" : null }, title(rec)),
      commandLine(rec)),
    ownerCell(rec),
    h("td", {}, evidence(rec), verdicts(rec)),
    h("td", { "data-col": "seen" }, f.duration(rec.savings.evidence_seconds),
      h("div", { class: "muted small" }, t("rec.confidence", { p: f.pct(rec.savings.confidence) }))),
    h("td", { class: "num", "data-col": "money", title: range(rec.savings) }, f.money0(rec.savings.money_per_month)),
    h("td", { class: "num", "data-col": "kwh" }, f.money0(rec.savings.energy_kwh_per_month)),
    h("td", { class: "num", "data-col": "kg" }, f.money0(rec.savings.carbon_kg_per_month)),
    h("td", {}, t("status." + rec.status)),
    dismissCell(rec, redraw));
}

function groupLine(recs) {
  const money = recs.reduce((sum, r) => sum + r.savings.money_per_month, 0);
  return t("rec.group", { n: recs.length, money: f.money0(money), cur: recs[0].savings.currency });
}

function recSpec(cur, redraw, show) {
  const saving = (field) => (r) => r.savings[field];
  return {
    id: "recommendations", sort: { key: "money", dir: "desc" }, row: (r) => row(r, redraw),
    columns: [{ key: "kind", label: t("col.kind"), value: (r) => t("kind." + r.kind) },
      { key: "subject", label: t("col.subject"), value: (r) => r.subject },
      { key: "owner", label: t("col.owner"), value: (r) => [owner(r), r.team, r.user].filter(Boolean).join(" ") },
      { key: "evidence", label: t("col.evidence") },
      { key: "seen", label: t("col.seen"), value: saving("evidence_seconds") },
      { key: "money", label: `${t("col.saves_money")} (${cur})`, num: true, value: saving("money_per_month") },
      { key: "kwh", label: t("col.saves_energy"), num: true, value: saving("energy_kwh_per_month") },
      { key: "kg", label: t("col.saves_carbon"), num: true, value: saving("carbon_kg_per_month") },
      { key: "status", label: t("col.status"), value: (r) => r.status }, { key: "action", label: "" }],
    filters: [{ key: "kind", label: t("col.kind"), value: (r) => r.kind, text: (v) => t("kind." + v) },
      { key: "team", label: t("col.team"), value: team },
      { key: "owner", label: t("col.owner"), value: owner },
      ...(show === "all" ? [{ key: "status", label: t("col.status"), value: (r) => r.status, text: (v) => t("status." + v) }] : [])],
    groups: [{ key: "kind", label: t("col.kind"), value: (r) => r.kind, text: (k, rs) => `${t("kind." + k)} · ${groupLine(rs)}` },
      { key: "team", label: t("col.team"), value: team, text: (o, rs) => `${o} · ${groupLine(rs)}` },
      { key: "owner", label: t("col.owner"), value: owner, text: (o, rs) => `${o} · ${groupLine(rs)}` },
      { key: "", label: t("tbl.no_group") }],
    search: (r) => [r.subject, r.title, owner(r), r.team, r.user, r.node, r.workload_key].join(" "),
    empty: t("rec.none"),
  };
}

function statusPicker(current) {
  const select = h("select", { id: "rec-status", "aria-label": t("rec.show") },
    h("option", { value: "live" }, t("rec.show.live")), h("option", { value: "all" }, t("rec.show.all")));
  select.value = current;
  select.addEventListener("change", () => {
    location.search = select.value === "all" ? "?status=all" : "";
  });
  return h("label", { class: "picker" }, t("rec.show"), " ", select);
}

export async function render({ params, redraw }) {
  const show = params.get("status") === "all" ? "all" : "live";
  const answer = await getJSON(show === "all" ? query("/v1/recommendations", { status: "all" }) : "/v1/recommendations");
  const recs = answer.recommendations;
  const live = recs.filter((r) => LIVE.has(r.status));
  const sum = (key) => live.reduce((total, r) => total + r.savings[key], 0);
  const cur = recs.length ? recs[0].savings.currency : "";
  return h("div", { class: "page" },
    h("div", { class: "title-row" }, h("h1", {}, t("rec.title")), statusPicker(show)),
    h("div", { class: "kpis" },
      kpi(t("rec.open_count"), "rec-count", f.int(live.length)),
      kpi(t("rec.saves_money"), "rec-money", f.money0(sum("money_per_month")), cur),
      kpi(t("rec.saves_energy"), "rec-kwh", f.money0(sum("energy_kwh_per_month")), "kWh"),
      kpi(t("rec.saves_carbon"), "rec-kg", f.money0(sum("carbon_kg_per_month")), "kgCO2e")),
    recs.length ? dataTable(recSpec(cur, redraw, show), recs) : h("p", { class: "muted" }, t("rec.none")));
}
