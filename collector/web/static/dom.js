// A tiny element builder: text always goes in as text, never as HTML.
const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function figure(name, text) {
  return h("span", { "data-figure": name }, text);
}

export function kpi(label, name, value, unit, note) {
  return h("div", { class: "kpi" },
    h("div", { class: "kpi-label" }, label),
    h("div", { class: "kpi-value" }, figure(name, value), unit ? h("span", { class: "unit" }, unit) : null),
    note ? h("div", { class: "kpi-note" }, note) : null);
}

export function table(columns, rows, attrs = {}) {
  // focusable: a table that scrolls sideways on a phone scrolls from the keyboard too
  return h("div", { class: "table-wrap", tabindex: "0" }, h("table", attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.label)))),
    h("tbody", {}, rows)));
}
