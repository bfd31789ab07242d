"""The code trees a read benchmark compares, and a real `gpufleet collector` per tree.

The venv is an editable install of one checkout, so a tree's packages win only when the
tree is first on ``sys.path``: each child runs with the tree as its working directory
(``python -m`` puts the cwd first) and on ``PYTHONPATH``, and ``verify_tree`` asks a child
started the same way where ``collector`` was imported from.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.collector_instructions import worktree
from bench.harness import TOKEN, free_port, wait_for_http

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CodeTree:
    """``label`` (before/after), the checkout's root and what it is (a revision)."""

    label: str
    root: Path
    revision: str


@dataclass(frozen=True)
class RunningCollector:
    tree: CodeTree
    base_url: str
    pid: int


def default_before() -> str:
    """The merge-base of ``main`` and HEAD (HEAD itself where there is no ``main``)."""
    done = subprocess.run(["git", "merge-base", "main", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() if done.returncode == 0 else "HEAD"


def describe(revision: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", revision], cwd=cwd,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip()


@contextlib.contextmanager
def code_trees(before: str, after_root: Path, into: Path) -> Iterator[list[CodeTree]]:
    """The ``before`` revision checked out under ``into`` and the working tree at
    ``after_root`` (uncommitted changes included); the checkout is removed after."""
    root = into / "before"
    remove: Callable[[], None] = worktree(before, root)
    try:
        after_rev = describe("HEAD", after_root) + " + working tree"
        yield [CodeTree("before", root, f"{before} ({describe(before)})"),
               CodeTree("after", after_root, after_rev)]  # fmt: skip
    finally:
        remove()


def tree_env(tree: CodeTree, extra: Mapping[str, str]) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(tree.root), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


def verify_tree(tree: CodeTree) -> str:
    """Where a child started as the collector is imports ``collector`` from; raises unless
    that is inside ``tree.root``."""
    code = "import collector; print(collector.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree.root, env=tree_env(tree, {}),
                          capture_output=True, text=True, check=True)  # fmt: skip
    origin = done.stdout.strip()
    if not Path(origin).resolve().is_relative_to(tree.root.resolve()):
        raise RuntimeError(f"{tree.label}: collector imported from {origin}, not {tree.root}")
    return origin


@contextlib.contextmanager
def running_collector(
    tree: CodeTree, work_dir: Path, settings_env: Mapping[str, str]
) -> Iterator[RunningCollector]:
    """``gpufleet collector`` from ``tree`` on a free loopback port with a fresh SQLite
    ledger in ``work_dir``, the bench token and ``settings_env``; its log in
    ``work_dir/collector.log`` (its tail is raised with a failure to start)."""
    port = free_port()
    env = tree_env(tree, {"GPUFLEET_SERVER__TOKENS": TOKEN, **settings_env})
    args = [sys.executable, "-m", "gpufleet.cli.main", "collector", "--port", str(port),
            "--db", str(work_dir / "ledger.db")]  # fmt: skip
    log_path = work_dir / "collector.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(args, cwd=tree.root, env=env, stdout=log, stderr=log)
    try:
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for_http(f"{base}/healthz", timeout_seconds=60)
        except TimeoutError as err:
            raise RuntimeError(f"{tree.label} collector: {log_path.read_text()[-2000:]}") from err
        yield RunningCollector(tree, base, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
