"""What every console page must satisfy in any language, colour scheme and width: no
horizontal overflow, no text outside the i18n catalogue, no serious axe-core violation.

The catalogue check walks every rendered text node. Text inside ``translate="no"`` (names
from the fleet: nodes, workloads, models, namespaces) is data; every other word must be a
word of the page language's catalogue (collector/web/static/i18n.js, read from the page's
own module) or a unit or currency code. So an English word left in the Chinese console, or
a hard-coded English string the catalogue lacks, fails; a missing key (``t()`` answers the
key itself, "kind.release_idle") fails too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.collector.web.demo_process import RunningDemo
from tests.paths import REPO

AXE = REPO / "tests" / "vendor" / "axe-core" / "axe.min.js"
#: units and codes that stand beside numbers in every language
UNITS = ["kWh", "kW", "W", "GiB", "kgCO2e", "h", "s", "UTC", "GPU", "CNY", "USD", "EUR", "gpufleet"]
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}

# the words (Latin-letter runs) of every rendered text node outside translate="no" that are
# not words of the catalogue of `lang`: [text, word] pairs
UNTRANSLATED_JS = """
async ([lang, units]) => {
  const { CATALOGUE } = await import("/ui/static/i18n.js");
  const words = new Set(units.map((u) => u.toLowerCase()));
  for (const text of Object.values(CATALOGUE[lang])) {
    const bare = text.replace(/\\{\\w+\\}/g, " ");
    for (const w of bare.match(/[A-Za-z][A-Za-z0-9]*/g) || []) words.add(w.toLowerCase());
  }
  const keys = new Set(Object.keys(CATALOGUE.en));
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode, el = node.parentElement, text = node.textContent.trim();
    if (!text || !el || el.closest("[translate='no'], script, style, option")) continue;
    if (!el.getClientRects().length) continue;  // not rendered (a closed <details>, hidden)
    if (text.includes(".") && keys.has(text)) { found.push([text, text]); continue; }
    for (const w of text.match(/[A-Za-z][A-Za-z0-9]*/g) || []) {
      if (!words.has(w.toLowerCase())) found.push([text, w]);
    }
  }
  return found;
}
"""

AXE_JS = """
async () => {
  const result = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa"] },
    resultTypes: ["violations"] });
  return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, help: v.help,
      nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ") + ": " + n.failureSummary) }));
}
"""


@dataclass(frozen=True)
class Look:
    """One way of looking at the console: language, colour scheme, viewport."""

    lang: str
    scheme: str
    viewport: str

    def __str__(self) -> str:
        return f"{self.lang}/{self.scheme}/{self.viewport}"


LOOKS = [Look(lang, scheme, vp) for lang in ("en", "zh") for scheme in ("light", "dark")
         for vp in VIEWPORTS]  # fmt: skip


def open_context(browser: Any, demo: RunningDemo, look: Look) -> Any:
    """A signed-in context that may inject axe (``bypass_csp``: the console's own CSP
    refuses any script it did not serve)."""
    width, height = VIEWPORTS[look.viewport]
    context = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme=look.scheme, bypass_csp=True)  # fmt: skip
    context.add_init_script(
        f"sessionStorage.setItem('gpufleet.token', '{demo.token}');"
        f"localStorage.setItem('gpufleet.lang', '{look.lang}')"
    )
    return context


def problems(page: Any, look: Look) -> list[str]:
    """Overflow, untranslated words and serious axe violations of the page as shown."""
    found = []
    width = VIEWPORTS[look.viewport][0]
    scroll = page.evaluate("document.documentElement.scrollWidth")
    if scroll > width:
        found.append(f"{scroll} px wide at {width} px")
    clipped = page.evaluate(
        "[...document.querySelectorAll('.table-wrap')]"
        ".filter(w => w.scrollWidth > w.clientWidth + 1)"
        ".map(w => w.dataset.scroll || w.firstElementChild.dataset.table)"
    )
    if clipped and look.viewport == "desktop":
        found.append(f"tables cut at {width} px: {clipped}")
    for text, word in page.evaluate(UNTRANSLATED_JS, [look.lang, UNITS]):
        found.append(f"not in the {look.lang} catalogue: {word!r} in {text!r}")
    page.add_script_tag(path=str(AXE))
    for violation in page.evaluate(AXE_JS):
        found.append(f"axe {violation['id']}: {violation['help']} {violation['nodes']}")
    return found
