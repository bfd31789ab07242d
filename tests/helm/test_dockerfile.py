"""Docker cannot run here: check that what the Dockerfile copies and runs exists.

Every COPY source is in the repository and not excluded by .dockerignore; the entry point is
the project's console script; the subcommands and flags the chart passes parse with the real
command-line parser; the image the chart names is the Dockerfile's user and ports.
"""

from __future__ import annotations

import importlib
import shlex
import tomllib
from pathlib import Path

import pytest

from gpufleet.cli.main import build_parser
from tests.helm.chart import REPO, container, render

DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    """Arguments of every ``name`` instruction (continuation lines joined)."""
    joined = DOCKERFILE.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [line.split(None, 1)[1] for line in lines if line.upper().startswith(name + " ")]


def copy_sources() -> list[str]:
    sources = []
    for args in instructions("COPY"):
        words = [w for w in shlex.split(args) if not w.startswith("--")]
        sources += words[:-1]
    return sources


def test_two_stages_and_a_non_root_user() -> None:
    assert len(instructions("FROM")) == 2
    assert instructions("USER") == ["10001:10001"]


def test_every_copied_path_exists_and_reaches_the_build_context() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert ignore[ignore.index("*") :]  # everything excluded, then re-included by name
    sources = copy_sources()
    assert {"pyproject.toml", "agent/", "collector/", "gpufleet/"} <= set(sources)
    for source in sources:
        assert (REPO / source).exists(), source
        assert f"!{source}" in ignore, f"{source} is excluded by .dockerignore"


def test_the_copied_packages_are_every_package_setuptools_ships() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") + "/" for pattern in include}
    assert packages <= set(copy_sources())
    # the readme the build backend reads is copied too
    assert pyproject["project"]["readme"] in copy_sources()


def test_the_entry_point_is_the_console_script() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert instructions("ENTRYPOINT") == ['["gpufleet"]']
    module, _, function = scripts["gpufleet"].partition(":")
    assert callable(getattr(importlib.import_module(module), function))
    assert "gpufleet --help" in DOCKERFILE  # the build runs it once


@pytest.mark.parametrize(("kind", "command"), [("DaemonSet", "agent"), ("Deployment", "collector")])
def test_the_chart_s_arguments_parse_with_the_real_cli(kind: str, command: str) -> None:
    out = render()
    main = container(out.pod_spec(kind))
    args = build_parser().parse_args(main["args"])
    assert args.command == command
    config = Path(args.config)
    mount_paths = {m["mountPath"] for m in main["volumeMounts"]}
    assert str(config) in mount_paths
    assert "command" not in main  # the image's ENTRYPOINT runs
    assert main["image"] == "gpufleet:0.1.0"


def test_the_collector_pod_runs_as_the_image_s_user() -> None:
    context = render().pod_spec("Deployment")["securityContext"]
    user, group = instructions("USER")[0].split(":")
    assert (context["runAsUser"], context["runAsGroup"]) == (int(user), int(group))
