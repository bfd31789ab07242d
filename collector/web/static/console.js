// The console's entry: sign-in, language, and a page that redraws itself every 15 s.
// Every page gets the fleet's summary (no per-GPU list) and fetches what it shows itself.
import { AuthError, getJSON, setToken, token } from "./api.js";
import { h } from "./dom.js";
import { stamp } from "./format.js";
import { lang, setLang, t, translateStatic } from "./i18n.js";
import * as energy from "./page_energy.js";
import * as fleet from "./page_fleet.js";
import * as idle from "./page_idle.js";
import * as plans from "./page_plans.js";
import * as savings from "./page_savings.js";
import * as recommendations from "./page_recommendations.js";
import * as workload from "./page_workload.js";

const PAGES = { fleet, idle, recommendations, workload, energy, plans, savings };
const REFRESH_MS = 15000;
const body = document.body;
const main = document.getElementById("main");
let timer = null;
let renders = 0;

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

async function render() {
  clearTimeout(timer);
  const page = PAGES[body.dataset.page] || fleet;
  try {
    const summary = await getJSON("/v1/fleet/summary");
    const content = await page.render({ summary, params: new URLSearchParams(location.search), redraw: render });
    main.replaceChildren(content);
    document.getElementById("updated").textContent = t("updated", { time: stamp(summary.now) });
  } catch (err) {
    if (err instanceof AuthError) {
      setToken(null);
      showLogin(renders > 0 ? t("login.refused") : "");
      return;
    }
    main.replaceChildren(h("p", { class: "error" }, t("error", { why: err.message })));
  }
  renders += 1;
  body.dataset.renders = String(renders);
  body.dataset.ready = "1";
  timer = setTimeout(render, REFRESH_MS);
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
  if (body.dataset.anonymous !== "true" && !token()) showLogin("");
  else signedIn();
}

function signedIn() {
  document.getElementById("signout").hidden = body.dataset.anonymous === "true";
  main.replaceChildren(h("p", { class: "muted" }, t("loading")));
  render();
}

start();
