// Small SVG charts drawn in the browser: no library, no network.
import { h, s } from "./dom.js";
import { clock, stamp } from "./format.js";
import { t } from "./i18n.js";

const day = (ts) => stamp(ts).slice(5, 10); // "12-01"

//: the windows a chart can show, in seconds
export const RANGES = { "1h": 3600, "6h": 6 * 3600, "24h": 86400, "7d": 7 * 86400 };
const chosenRanges = new Map();

// the window a page's charts and KPIs share: the ?range= of the URL, else the last picked
export function rangeOf(page, fallback, allowed = Object.keys(RANGES)) {
  const asked = new URLSearchParams(location.search).get("range");
  const name = allowed.includes(asked) ? asked : chosenRanges.get(page) || fallback;
  return { name, seconds: RANGES[name] };
}

// 1h · 6h · 24h · 7d as buttons; a pick redraws the page (no reload) and stays in the URL
export function rangePicker(page, current, redraw, allowed = Object.keys(RANGES)) {
  const pick = (name) => () => {
    chosenRanges.set(page, name);
    const params = new URLSearchParams(location.search);
    params.set("range", name);
    history.replaceState(null, "", `${location.pathname}?${params}`);
    redraw();
  };
  return h("div", { class: "range", role: "group", "aria-label": t("range.label") },
    h("span", { class: "muted" }, t("range.label")), " ",
    allowed.map((name) => h("button", { type: "button", class: name === current ? "" : "quiet",
      "aria-pressed": String(name === current), "data-range": name, onclick: pick(name) }, t("range." + name))));
}

const H = 190, LEFT = 52, RIGHT = 14, TOP = 10, BOTTOM = 24;
const W = 560;
//: tick labels on screen, whatever the picture's scale (fitCharts)
const TICK_PX = 11;

// once on the page: each chart's font in its own units, so that its labels are 11 px on
// screen (a 560-unit picture drawn 340 px wide shrank them to 7 px)
export function fitCharts(root) {
  for (const svg of root.querySelectorAll("svg.chart-svg[data-fit]")) {
    const shown = svg.getBoundingClientRect().width;
    if (shown > 0) svg.style.fontSize = `${(TICK_PX * Number(svg.dataset.fit)) / shown}px`;
  }
}

// the values nearest the pointer, in words under the chart: "12:05 · gpu-node-00 #4: 93 %"
function hover(svg, series, x, opts, readout) {
  const width = W;
  const times = [...new Set(series.flatMap((one) => one.points.map((p) => p.t)))].sort((a, b) => a - b);
  const cursor = s("line", { class: "cursor", x1: 0, x2: 0, y1: TOP, y2: H - BOTTOM, visibility: "hidden" });
  svg.append(cursor);
  svg.addEventListener("pointermove", (event) => {
    const box = svg.getBoundingClientRect();
    const at = opts.tStart + ((event.clientX - box.left) / box.width * width - LEFT) / (width - LEFT - RIGHT) * (opts.tEnd - opts.tStart);
    const ts = times.reduce((best, v) => (Math.abs(v - at) < Math.abs(best - at) ? v : best), times[0]);
    if (ts === undefined) return;
    cursor.setAttribute("x1", x(ts));
    cursor.setAttribute("x2", x(ts));
    cursor.setAttribute("visibility", "visible");
    const values = series.map((one) => [one.name, one.points.find((p) => p.t === ts)])
      .filter(([, p]) => p && p.v !== null).map(([name, p]) => `${name}: ${opts.format(p.v)}${opts.unit}`);
    readout.textContent = `${clock(ts)} · ${values.join("; ")}`;
    readout.dataset.t = String(ts);
  });
}
const TIME_STEPS = [600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

function niceStep(span, ticks) {
  const raw = span / ticks;
  const power = 10 ** Math.floor(Math.log10(raw));
  const m = raw / power;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * power;
}

function yAxis(maxValue, fixedMax) {
  if (fixedMax !== undefined) return { max: fixedMax, step: fixedMax / 4 };
  const step = niceStep(maxValue > 0 ? maxValue : 1, 4);
  return { max: Math.ceil((maxValue > 0 ? maxValue : 1) / step) * step, step };
}

function segments(points, x, y, maxGap) {
  const runs = [];
  let run = [], last = null;
  for (const p of points) {
    if (p.v === null || p.v === undefined || (last !== null && p.t - last > maxGap)) {
      if (run.length) runs.push(run);
      run = [];
    }
    if (p.v !== null && p.v !== undefined) run.push(`${x(p.t).toFixed(1)} ${y(p.v).toFixed(1)}`);
    last = p.t;
  }
  if (run.length) runs.push(run);
  return runs.map((r) => (r.length === 1 ? `M${r[0]} h1` : "M" + r.join(" L"))).join(" ");
}

function grid(axis, y, tStart, tEnd, x, format) {
  const lines = [];
  for (let v = 0; v <= axis.max + axis.step / 2; v += axis.step) {
    lines.push(s("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v) }));
    lines.push(s("text", { class: "tick", x: LEFT - 6, y: y(v) + 4, "text-anchor": "end" }, format(v)));
  }
  const step = TIME_STEPS.find((st) => (tEnd - tStart) / st <= 6) || 86400;
  for (let ts = Math.ceil(tStart / step) * step; ts <= tEnd; ts += step) {
    lines.push(s("line", { class: "grid", x1: x(ts), x2: x(ts), y1: TOP, y2: H - BOTTOM }));
    lines.push(s("text", { class: "tick", x: x(ts), y: H - 6, "text-anchor": "middle" }, step >= 86400 ? day(ts) : clock(ts)));
  }
  return lines;
}

// series: [{name, points: [{t, v}]}]; opts: {title, tStart, tEnd, format, unit, max, gap}
export function lineChart(series, opts) {
  const values = series.flatMap((one) => one.points.map((p) => p.v)).filter((v) => v !== null);
  const axis = yAxis(Math.max(0, ...values), opts.max);
  const x = (ts) => LEFT + ((ts - opts.tStart) / Math.max(1, opts.tEnd - opts.tStart)) * (W - LEFT - RIGHT);
  const y = (v) => H - BOTTOM - (v / axis.max) * (H - TOP - BOTTOM);
  const paths = series.map((one, i) => s("path", {
    class: `line series-${i % 8}`, d: segments(one.points, x, y, opts.gap || Infinity),
    "data-series": one.name, "data-points": one.points.filter((p) => p.v !== null).length,
  }));
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": opts.title, class: "chart-svg", "data-fit": W },
    grid(axis, y, opts.tStart, opts.tEnd, x, opts.format), paths);
  const readout = h("p", { class: "chart-readout muted small", "data-readout": opts.id, translate: "no" }, "\u00a0");
  hover(svg, series, x, opts, readout);
  const legend = h("ul", { class: "legend" }, series.map((one, i) => {
    const last = [...one.points].reverse().find((p) => p.v !== null);
    return h("li", { "data-series": one.name }, h("span", { class: `swatch series-${i % 8}` }), h("span", { translate: "no" }, one.name), " ",
      h("span", { class: "muted", "data-last": last ? last.v : "" }, last ? opts.format(last.v) + opts.unit : "—"));
  }));
  return h("figure", { class: "chart", "data-chart": opts.id },
    h("figcaption", {}, opts.title, h("span", { class: "muted" }, ` (${opts.unit.trim()})`)), svg, readout, legend);
}

// rows: [{label, value, text}], horizontal bars scaled to the largest value; HTML, not SVG,
// so labels keep their size and wrap on a phone (a 1180-unit picture made them 3 px there)
export function barChart(rows, opts) {
  const top = Math.max(...rows.map((r) => r.value), 0) || 1;
  const bars = rows.map((r) => {
    const bar = h("span", { class: `hbar ${r.muted ? "bar-muted" : ""}` });
    bar.style.width = `${Math.max(0.3, (Math.max(0, r.value) / top) * 100)}%`;
    return h("div", { class: "hbar-row", "data-bar": r.label },
      h("span", { class: "hbar-label", translate: r.muted ? null : "no" }, r.label),
      h("span", { class: "hbar-track" }, bar), h("span", { class: "hbar-value" }, r.text));
  });
  return h("figure", { class: "chart", "data-chart": opts.id },
    h("figcaption", {}, opts.title), h("div", { class: "hbars" }, bars));
}

// counts: [{key, label, value}] as one stacked bar; a bigger value is a wider part
export function stackBar(counts, id) {
  const total = counts.reduce((sum, c) => sum + c.value, 0) || 1;
  let x = 0;
  const parts = counts.map((c) => {
    const width = (c.value / total) * W;
    const part = s("rect", { class: `stack state-${c.key}`, x, y: 0, width, height: 14 },
      s("title", {}, `${c.label}: ${c.value}`));
    x += width;
    return part;
  });
  return s("svg", { viewBox: `0 0 ${W} 14`, class: "stack-svg", preserveAspectRatio: "none", "data-chart": id }, parts);
}
