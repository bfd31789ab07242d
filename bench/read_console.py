"""The console's fleet page in headless Chromium (Debian's, driven by Playwright as
tests/collector/web/test_browser.py drives it): seconds from navigation until the page
says its data is drawn (``body[data-ready='1']``, set by console.js after its first
render), each load in a fresh browser context (no cache, signed in by the token in the
URL fragment, as ``gpufleet demo`` prints it)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from bench.harness import TOKEN
from tests.collector.web.demo_process import CHROMIUM, CHROMIUM_ARGS

READY = "body[data-ready='1']"


def unavailable() -> str | None:
    """Why the page cannot be timed here, or None."""
    if not CHROMIUM.exists():
        return "Debian package chromium is not installed"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (the dev extra)"
    return None


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def fleet_page_ready_seconds(chromium: Any, base_url: str, timeout_seconds: float) -> float:
    """One load of ``/ui/`` until its data-ready marker; raises on a page error."""
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, locale="en-US")
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        start = time.perf_counter()
        page.goto(f"{base_url}/ui/#token={TOKEN}")
        page.wait_for_selector(READY, timeout=timeout_seconds * 1000)
        ready = time.perf_counter() - start
        errors += [f"drawn: {text}" for text in page.locator("#main .error").all_inner_texts()]
    finally:
        context.close()
    if errors:
        raise RuntimeError(f"console page error at {base_url}: {errors[0]}")
    return ready
