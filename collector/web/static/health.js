// A GPU's health on its tile (issue 21): a badge per problem the collector names (XID 79,
// another hardware XID, ECC, throttling, hot GPU or memory), a short word each, so the cue
// is not colour alone; each problem's sentence goes in the tooltip and the node's list.
import { h } from "./dom.js";
import * as f from "./format.js";
import { t } from "./i18n.js";

const temp = (value) => (value === null || value === undefined ? "—" : f.int(value));

function xidWords(gpu, wanted) {
  const xids = (gpu.recent_xids || []).filter(wanted);
  return { codes: xids.map((x) => x.code).join(", "), when: xids.length ? f.clock(xids[0].last_seen) : "—" };
}

// the sentence of one problem of `gpu`
function sentence(gpu, problem) {
  const health = gpu.health || {};
  switch (problem) {
    case "fell_off_bus": return t("health.fell_off_bus", xidWords(gpu, (x) => x.code === 79));
    case "xid": return t("health.xid", xidWords(gpu, (x) => x.code !== 79));
    case "ecc": return [t("health.ecc", { n: f.int(health.ecc_uncorrected_total || 0) }),
      health.remapped_rows_pending ? t("health.remap_pending") : null].filter(Boolean).join(" · ");
    case "throttled": return t("health.throttled",
      { why: (health.throttled_by || []).map((r) => t("throttle." + r)).join(", ") });
    case "hot": return t("health.hot", { t: temp(health.temperature_celsius) });
    case "memory_hot": return t("health.memory_hot", { t: temp(health.memory_temperature_celsius) });
    default: return problem;
  }
}

// the tooltip's health words: each problem's sentence, else the temperature when known
export function healthWords(gpu) {
  const problems = gpu.problems || [];
  if (problems.length) return problems.map((p) => sentence(gpu, p));
  const celsius = gpu.health?.temperature_celsius;
  return celsius === null || celsius === undefined ? [] : [t("health.temperature", { t: temp(celsius) })];
}

// the tile's badges: one short word per problem
export function healthBadges(gpu) {
  const problems = gpu.problems || [];
  if (!problems.length) return null;
  return h("span", { class: "tile-badges" }, problems.map((p) =>
    h("span", { class: "tile-badge", "data-problem": p }, t("health.short." + p))));
}

// under a node's tiles: each GPU with a problem, and its sentences (a phone has no hover)
export function nodeHealth(gpus) {
  const ailing = gpus.filter((g) => (g.problems || []).length);
  if (!ailing.length) return null;
  return h("ul", { class: "node-health" }, ailing.map((g) =>
    h("li", { "data-uuid": g.uuid, "data-problems": g.problems.join(",") },
      h("strong", { translate: "no" }, "#" + (g.mig_profile || String(g.index))), " ",
      healthWords(g).join(" · "))));
}
