"""The notifications section: strict keys, secrets from files, never shown in a repr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.config import CollectorSettings
from collector.notify.settings import resolve_channel
from gpufleet.settings import ConfigError, load_settings

URL = "https://open.feishu.cn/open-apis/bot/v2/hook/0d6c-secret-token"


def load(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> CollectorSettings:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return load_settings(CollectorSettings, path, environ or {})


def test_channels_read_their_url_and_secret_from_files_and_hide_them(tmp_path: Path) -> None:
    (tmp_path / "url").write_text(URL + "\n")
    (tmp_path / "secret").write_text("s3cr3t\n")
    settings = load(
        tmp_path,
        f"""
notifications:
  channels:
    - {{name: cn, kind: feishu, url_file: {tmp_path / "url"}, secret_file: {tmp_path / "secret"},
       language: zh}}
    - {{name: dt, kind: dingtalk, url_file: {tmp_path / "url"}}}
""",
    )
    feishu, dingtalk = (resolve_channel(c) for c in settings.notifications.channels)
    assert (feishu.url, feishu.secret, feishu.language) == (URL, "s3cr3t", "zh")
    assert (feishu.digest_interval_seconds, feishu.rate_per_minute) == (0.0, 100)
    assert (dingtalk.digest_interval_seconds, dingtalk.rate_per_minute) == (60.0, 20)
    shown = repr(settings) + repr(feishu) + repr(dingtalk)
    assert "secret-token" not in shown and "s3cr3t" not in shown


def test_channels_from_the_environment_as_json(tmp_path: Path) -> None:
    env = {
        "GPUFLEET_NOTIFICATIONS__CHANNELS": json.dumps(
            [{"name": "ops", "kind": "slack", "url": "https://hooks.example/services/T/B/x"}]
        )
    }
    settings = load(tmp_path, "", env)
    assert resolve_channel(settings.notifications.channels[0]).kind == "slack"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "notifications: {channels: [{name: a, kind: telegram, url: 'https://x'}]}",
            "notifications.channels[0].kind: 'telegram' is not one of",
        ),
        (
            "notifications: {channels: [{name: a, kind: slack, hook: 'https://x'}]}",
            "notifications.channels[0].hook: unknown key",
        ),
        (
            "notifications: {channels: [{name: a, kind: slack}, {name: a, kind: wecom}]}",
            "channel names must be unique",
        ),
        (
            "notifications: {channels: [{name: a, kind: slack}], routes: [{channels: [b]}]}",
            "unknown channel 'b'",
        ),
        ("actions: {default: {mode: enforce, warn_at: [0.5, 1.5]}}", "warn_at fractions"),
        ("actions: {policies: {ml: {mode: sometimes}}}", "actions.policies.ml.mode"),
    ],
)
def test_bad_settings_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load(tmp_path, text)


def test_a_channel_without_a_url_or_with_a_non_http_one_is_refused(tmp_path: Path) -> None:
    settings = load(
        tmp_path,
        """
notifications:
  channels: [{name: a, kind: slack}, {name: b, kind: wecom, url: 'ftp://x/y'}]
""",
    )
    with pytest.raises(ConfigError, match=r"notifications\.channels\.a\.url: set url_file"):
        resolve_channel(settings.notifications.channels[0])
    with pytest.raises(ConfigError, match=r"notifications\.channels\.b\.url: must be an http"):
        resolve_channel(settings.notifications.channels[1])


def test_auto_release_is_off_and_dry_run_by_default() -> None:
    actions = CollectorSettings().actions
    assert actions.default.mode == "off" and actions.default.dry_run
    assert not actions.any_enabled()
    assert CollectorSettings().notifications.channels == []


def test_directory_and_owner_routes_are_checked_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "url").write_text(URL + "\n")
    channels = f"channels: [{{name: cn, kind: feishu, url_file: {tmp_path / 'url'}}}]"
    with pytest.raises(ConfigError, match=r"notifications\.teams\.vision\.channels.*'nope'"):
        load(tmp_path, f"notifications:\n  {channels}\n  teams: {{vision: {{channels: [nope]}}}}\n")
    with pytest.raises(ConfigError, match=r"notifications\.routes\[0\]: give channels"):
        load(tmp_path, f"notifications:\n  {channels}\n  routes: [{{namespaces: [ml]}}]\n")
    with pytest.raises(ConfigError, match="slak"):  # a misspelt service is refused, not ignored
        load(tmp_path, f"notifications:\n  {channels}\n  users: {{alice: {{slak: U1}}}}\n")
    ok = load(tmp_path, f"notifications:\n  {channels}\n  routes: [{{to_owner_team: true}}]\n")
    assert ok.notifications.routes[0].to_owner_team
