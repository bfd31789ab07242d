#!/usr/bin/env python3
"""Regenerate docs/images/: the console's pages, desktop (1280x800) and phone (390x844).

Runs ``gpufleet demo`` (two simulated hours of history, a spare node so there is a
scale-down), opens each page in Debian's headless Chromium through Playwright, and saves
what the screen shows as ``docs/images/<page>-<desktop|phone>.png`` (the README shows the
fleet page's two):

    .venv/bin/python scripts/screenshot.py [--port 18480] [--out docs/images] [--dark]
        [--pages fleet,recommendations (the default) | all | some of fleet,idle,
         recommendations,energy,plans,workload]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]  # fmt: skip


def _ctrl_c_on() -> None:
    """A shell starts background jobs with SIGINT ignored; the demo stops cleanly on it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def console_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.match(r"console\s+(\S+)", line)
        if match:
            return match.group(1)
    raise SystemExit("the demo exited without printing its console URL")


PAGES = {
    "fleet": "/ui/",
    "idle": "/ui/idle",
    "recommendations": "/ui/recommendations",
    "energy": "/ui/energy",
    "plans": "/ui/plans",
    "workload": "/ui/workload?key=slurm%3A842992",
}
VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
#: the pictures kept in docs/images (a few, each under 200 kB); ``--pages all``: every page
DEFAULT_PAGES = ("fleet", "recommendations")


def shoot(url: str, out: Path, dark: bool, pages: list[str]) -> list[Path]:
    base, _, fragment = url.partition("/ui/")
    written = []
    scheme = "dark" if dark else "light"
    with sync_playwright() as playwright:
        chromium = playwright.chromium
        browser = chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        time.sleep(3)  # let every simulated agent ship once after the history pre-run
        for device, (width, height) in VIEWPORTS.items():
            viewport = {"width": width, "height": height}
            context = browser.new_context(viewport=viewport, locale="en-US", color_scheme=scheme)
            context.add_init_script("localStorage.setItem('gpufleet.lang', 'en')")
            page = context.new_page()
            page.goto(f"{base}/ui/{fragment}")  # signs in (the token in the fragment)
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            for name in pages:
                page.goto(base + PAGES[name])
                page.wait_for_selector("body[data-ready='1']", timeout=30_000)
                path = out / f"{name}-{device}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(path))
                written.append(path)
            context.close()
        browser.close()
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--dark", action="store_true")
    choices = ", ".join(PAGES)
    parser.add_argument("--pages", default=",".join(DEFAULT_PAGES), help=f"{choices}; or all")
    args = parser.parse_args()
    pages = list(PAGES) if args.pages == "all" else [p for p in args.pages.split(",") if p]
    if unknown := [p for p in pages if p not in PAGES]:
        parser.error(f"--pages: no page {unknown[0]!r}; choose from {', '.join(PAGES)}")
    command = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo", "--plain",
               "--history", "2", "--speed", "0.001", "--duration", "300", "--port", str(args.port),
               "--nodes", "3", "--spare"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_on)  # fmt: skip
    try:
        written = shoot(console_url(proc), args.out, args.dark, pages)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    for path in written:
        print(f"wrote {path} ({path.stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
