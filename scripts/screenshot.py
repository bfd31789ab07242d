#!/usr/bin/env python3
"""Regenerate docs/fleet.png, the README's picture of the console's fleet page.

Runs ``gpufleet demo`` (two simulated hours of history), opens the fleet page in Debian's
headless Chromium through Playwright, and saves a 1280 px wide screenshot:

    .venv/bin/python scripts/screenshot.py [--port 18480] [--out docs/fleet.png] [--dark]
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


def shoot(url: str, out: Path, dark: bool) -> None:
    with sync_playwright() as playwright:
        chromium = playwright.chromium
        browser = chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 720}, locale="en-US",
                                      color_scheme="dark" if dark else "light")  # fmt: skip
        context.add_init_script("localStorage.setItem('gpufleet.lang', 'en')")
        page = context.new_page()
        time.sleep(3)  # let every simulated agent ship once after the history pre-run
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=True)
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "fleet.png")
    parser.add_argument("--dark", action="store_true")
    args = parser.parse_args()
    command = [sys.executable, "-m", "gpufleet", "--log-level", "WARNING", "demo", "--plain",
               "--history", "2", "--duration", "300", "--port", str(args.port)]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_on)  # fmt: skip
    try:
        shoot(console_url(proc), args.out, args.dark)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
