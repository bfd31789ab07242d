// A /ui/ path the console has no page for: say so, in the console, with the way back.
import { h } from "./dom.js";
import { t } from "./i18n.js";

export async function render() {
  return h("div", { class: "page", "data-figure": "not-found" },
    h("h1", {}, t("nf.title")),
    h("p", {}, t("nf.text"), " ", h("code", { translate: "no" }, location.pathname)),
    h("p", {}, h("a", { href: "/ui/" }, t("nf.home"))));
}
