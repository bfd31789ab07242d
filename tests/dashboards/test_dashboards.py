"""The committed dashboards: equal to what the generator renders, and fit for an ops team
(units, descriptions, datasource variable, links, unique ids)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpufleet.cli.main import main
from gpufleet.dashboards.build import all_dashboards, readme, rendered_files
from tests.dashboards.queries import DASHBOARDS, dashboard_files, load

BOARDS = {path.stem: load(path) for path in dashboard_files()}


def test_regenerating_produces_exactly_the_committed_files() -> None:
    for name, text in rendered_files().items():
        committed = (DASHBOARDS / name).read_text(encoding="utf-8")
        assert committed == text, f"dashboards/{name} is stale: run gpufleet dashboards generate"


def test_no_committed_dashboard_is_left_over_from_an_older_generator() -> None:
    assert set(BOARDS) == set(all_dashboards())


def test_generate_command_writes_the_same_files(tmp_path: Path) -> None:
    assert main(["dashboards", "generate", "--out", str(tmp_path)]) == 0
    for name, text in rendered_files().items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text


def test_readme_lists_every_panel_query_with_its_unit() -> None:
    text = (DASHBOARDS / "README.md").read_text(encoding="utf-8")
    assert text == readme(all_dashboards())
    for board in BOARDS.values():
        assert f"## {board['title']}" in text
        for panel in board["panels"]:
            unit = panel["fieldConfig"]["defaults"]["unit"]
            for target in panel["targets"]:
                expr = target["expr"].replace("|", "\\|")
                assert f"| {panel['title']} | {panel['type']} | {unit} | `{expr}` |" in text


def _panels() -> list[tuple[str, dict[str, Any]]]:
    return [(name, panel) for name, board in BOARDS.items() for panel in board["panels"]]


def _panel_id(value: Any) -> str:
    return value if isinstance(value, str) else str(value["title"])


@pytest.mark.parametrize(("board", "panel"), _panels(), ids=_panel_id)
def test_every_panel_has_unit_description_datasource_and_queries(
    board: str, panel: dict[str, Any]
) -> None:
    assert panel["fieldConfig"]["defaults"]["unit"], "no unit"
    assert len(panel["description"]) > 20, "no description"
    assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert panel["targets"], "no query"
    for target in panel["targets"]:
        assert target["datasource"]["uid"] == "${datasource}"
    grid = panel["gridPos"]
    assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_has_datasource_variable_links_and_unique_panel_ids(name: str) -> None:
    board = BOARDS[name]
    variables = board["templating"]["list"]
    assert variables[0]["type"] == "datasource" and variables[0]["query"] == "prometheus"
    assert board["uid"].startswith("gpufleet-") and len(board["uid"]) <= 40
    assert board["links"][0]["tags"] == ["gpufleet"] and "gpufleet" in board["tags"]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    defined = {v["name"] for v in variables} | {"__range", "__rate_interval", "__interval"}
    for panel in board["panels"]:
        for target in panel["targets"]:
            for used in _variables_in(target["expr"]):
                assert used in defined, f"{panel['title']}: ${used} is not a variable"


def _variables_in(text: str) -> list[str]:
    return re.findall(r"\$\{?(\w+)", text)


def test_dashboards_link_to_each_other_by_uid() -> None:
    uids = {board["uid"] for board in BOARDS.values()}
    assert len(uids) == len(BOARDS) == 5
    for board in BOARDS.values():
        for panel in board["panels"]:
            for link in panel["fieldConfig"]["defaults"].get("links", []):
                target_uid = link["url"].split("/d/")[1].split("?")[0]
                assert target_uid in uids, link
