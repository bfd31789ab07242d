// The console's entry: sign-in, language, and a page that redraws itself every 15 s,
// keeping the scroll, focus and each table's state. Every page gets the fleet's summary (no
// per-GPU list) and fetches what it shows itself. A failure keeps the page and says what
// failed above it, retrying with backoff (and a button to retry now).
import { AuthError, getJSON, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { fitCharts } from "./charts.js";
import { stamp } from "./format.js";
import { lang, setLang, t, translateStatic } from "./i18n.js";
import * as energy from "./page_energy.js";
import * as fleet from "./page_fleet.js";
import * as idle from "./page_idle.js";
import * as notfound from "./page_notfound.js";
import * as plans from "./page_plans.js";
import * as savings from "./page_savings.js";
import * as recommendations from "./page_recommendations.js";
import * as workload from "./page_workload.js";

const PAGES = { fleet, idle, recommendations, workload, energy, plans, savings, notfound };
const REFRESH_MS = 15000;
//: seconds before each retry after a failure, the last one repeated
const RETRY_SECONDS = [2, 4, 8, 16, 30];
const body = document.body;
const main = document.getElementById("main");
let timer = null;
let renders = 0;
let failures = 0;
let countdown = null;

function takeTokenFromFragment() {
  // `gpufleet demo` prints /ui/#token=...; move it into this tab's session, out of the URL
  const match = location.hash.match(/^#token=([^&]+)$/);
  if (!match) return;
  setToken(decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

function showLogin(message) {
  clearTimeout(timer);
  main.hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("signout").hidden = true;
  const error = document.getElementById("login-error");
  error.hidden = !message;
  error.textContent = message || "";
  document.getElementById("token").focus();
  body.dataset.ready = "login";
}

// what a redraw must not lose: the window's scroll, each table's, the focused control
function remember() {
  const active = document.activeElement;
  return { y: window.scrollY, focus: active && main.contains(active) ? active.id : null,
    caret: active && "selectionStart" in active ? active.selectionStart : null,
    tables: [...main.querySelectorAll("[data-scroll]")].map((el) => [el.dataset.scroll, el.scrollLeft, el.scrollTop]) };
}

function restore(kept) {
  for (const [id, left, top] of kept.tables) {
    const el = main.querySelector(`[data-scroll="${id}"]`);
    if (el) Object.assign(el, { scrollLeft: left, scrollTop: top });
  }
  const focus = kept.focus && document.getElementById(kept.focus);
  if (focus) {
    focus.focus();
    if (kept.caret !== null && "setSelectionRange" in focus) try { focus.setSelectionRange(kept.caret, kept.caret); } catch { /* not text */ }
  }
  window.scrollTo(0, kept.y);
}

function banner(err) {
  clearInterval(countdown);
  const wait = RETRY_SECONDS[Math.min(failures, RETRY_SECONDS.length) - 1];
  let left = wait;
  const count = h("span", { "data-retry-in": wait }, t("retry.in", { n: left }));
  const retry = h("button", { type: "button", class: "quiet", "data-retry": "now" }, t("retry.now"));
  retry.addEventListener("click", () => render());
  const box = h("div", { class: "banner error-box", role: "alert", "data-error": err.status ?? "" },
    h("strong", {}, t("error", { why: err.message })), " ", count, " ", retry);
  countdown = setInterval(() => {
    left -= 1;
    count.textContent = t("retry.in", { n: Math.max(0, left) });
  }, 1000);
  document.getElementById("banner").replaceChildren(box);
  return wait;
}

async function render() {
  clearTimeout(timer);
  const page = PAGES[body.dataset.page] || notfound;
  let wait = REFRESH_MS;
  try {
    const summary = await getJSON("/v1/fleet/summary");
    const content = await page.render({ summary, params: new URLSearchParams(location.search), redraw: render });
    const kept = remember();
    main.replaceChildren(content);
    fitCharts(main);
    restore(kept);
    failures = 0;
    clearInterval(countdown);
    document.getElementById("banner").replaceChildren();
    document.getElementById("updated").textContent = t("updated", { time: stamp(summary.now) });
  } catch (err) {
    if (err instanceof AuthError) {
      setToken(null);
      showLogin(renders > 0 ? t("login.refused") : "");
      return;
    }
    failures += 1;
    wait = banner(err) * 1000; // the page shown so far stays
    if (main.querySelector(".skeleton")) main.replaceChildren();
  }
  renders += 1;
  body.dataset.renders = String(renders);
  body.dataset.ready = "1";
  timer = setTimeout(render, wait);
}

function start() {
  takeTokenFromFragment();
  setLang(lang());
  translateStatic();
  const select = document.getElementById("lang");
  select.value = lang();
  select.addEventListener("change", () => {
    setLang(select.value);
    translateStatic();
    render();
  });
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === body.dataset.page) link.setAttribute("aria-current", "page");
  }
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(document.getElementById("token").value.trim());
    document.getElementById("token").value = "";
    document.getElementById("login").hidden = true;
    main.hidden = false;
    renders = 1; // a refusal now is worth saying
    signedIn();
  });
  document.getElementById("signout").addEventListener("click", () => {
    setToken(null);
    renders = 0;
    showLogin("");
  });
  window.addEventListener("resize", () => fitCharts(main));
  if (body.dataset.anonymous !== "true" && !token()) showLogin("");
  else signedIn();
}

function signedIn() {
  document.getElementById("signout").hidden = body.dataset.anonymous === "true";
  // a skeleton of KPIs and a table until the first answer
  main.replaceChildren(h("div", { class: "skeleton", "aria-busy": "true" },
    h("p", { class: "muted" }, t("loading")),
    h("div", { class: "kpis" }, [1, 2, 3, 4].map(() => h("div", { class: "kpi sk" }))),
    h("div", { class: "sk sk-block" })));
  render();
}

start();
