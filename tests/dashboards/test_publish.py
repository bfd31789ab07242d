"""``gpufleet dashboards publish`` against a Grafana stand-in speaking the same endpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.cli.main import main
from gpufleet.dashboards.build import all_dashboards
from tests.dashboards.grafana_server import grafana

TOKEN = "glsa_test_token_123"


def _token_file(tmp_path: Path, token: str = TOKEN) -> Path:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    return path


def _publish(url: str, token_file: Path, *extra: str) -> int:
    return main(["dashboards", "publish", "--url", url, "--token-file", str(token_file), *extra])


def test_publish_creates_the_folder_and_uploads_every_dashboard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with grafana(TOKEN) as (url, state):
        assert _publish(url, _token_file(tmp_path)) == 0
    assert state.folders == {"gpufleet": "gpufleet"}
    expected = all_dashboards()
    assert set(state.dashboards) == {board["uid"] for board in expected.values()}
    for board in expected.values():
        stored = state.dashboards[board["uid"]]
        assert stored["overwrite"] is True and stored["folderUid"] == "gpufleet"
        assert stored["dashboard"]["panels"] == board["panels"]
    assert state.requests[0] == ("POST", "/api/folders")
    assert capsys.readouterr().out.count("version 1") == len(expected)


def test_publishing_again_overwrites_and_keeps_the_existing_folder(tmp_path: Path) -> None:
    token_file = str(_token_file(tmp_path))
    with grafana(TOKEN) as (url, state):
        assert main(["dashboards", "publish", "--url", url, "--token-file", token_file]) == 0
        assert main(["dashboards", "publish", "--url", url, "--token-file", token_file]) == 0
    assert ("GET", "/api/folders/gpufleet") in state.requests  # 409 -> confirmed it exists
    assert {stored["version"] for stored in state.dashboards.values()} == {2}


def test_a_412_is_retried_once(tmp_path: Path) -> None:
    with grafana(TOKEN) as (url, state):
        state.refuse_412["gpufleet-fleet"] = 1
        assert _publish(url, _token_file(tmp_path)) == 0
    assert state.dashboards["gpufleet-fleet"]["version"] == 1
    assert state.requests.count(("POST", "/api/dashboards/db")) == len(all_dashboards()) + 1


def test_a_repeated_412_fails_with_grafanas_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with grafana(TOKEN) as (url, state):
        state.refuse_412["gpufleet-fleet"] = 2
        assert _publish(url, _token_file(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "gpufleet-fleet" in err and "412 version-mismatch" in err
    assert "gpufleet-fleet" not in state.dashboards


def test_a_wrong_token_fails_without_printing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with grafana(TOKEN) as (url, state):
        token_file = str(_token_file(tmp_path, "wrong-secret-value"))
        assert main(["dashboards", "publish", "--url", url, "--token-file", token_file]) == 1
    err = capsys.readouterr().err
    assert "401" in err and "wrong-secret-value" not in err
    assert state.folders == {} and state.dashboards == {}


def test_from_dir_uploads_the_committed_json(tmp_path: Path) -> None:
    board_dir = tmp_path / "boards"
    board_dir.mkdir()
    board = {"uid": "custom-1", "title": "Custom", "panels": [], "schemaVersion": 39, "id": 7}
    (board_dir / "custom.json").write_text(json.dumps(board))
    with grafana(TOKEN) as (url, state):
        assert _publish(url, _token_file(tmp_path), "--from-dir", str(board_dir)) == 0
    assert state.dashboards["custom-1"]["dashboard"]["id"] is None
    assert set(state.dashboards) == {"custom-1"}


def test_a_missing_token_file_is_a_configuration_error(tmp_path: Path) -> None:
    assert _publish("http://127.0.0.1:9", tmp_path / "nope") == 2
