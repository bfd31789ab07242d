"""Where tokens come from (collector/http/auth.py) and how a header is checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collector.config import CollectorSettings, ServerSettings
from collector.http.auth import BearerAuth, load_tokens
from gpufleet.settings import ConfigError, load_settings


def test_tokens_from_settings_and_file_add_up(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# agents of rack 1\nfile-token-1\n\n  file-token-2  \n# old: revoked\n")
    settings = ServerSettings(tokens=["inline-token", " "], tokens_file=path)
    assert load_tokens(settings) == {"inline-token", "file-token-1", "file-token-2"}


def test_tokens_from_the_environment_reach_the_settings() -> None:
    environ = {"GPUFLEET_SERVER__TOKENS": "env-token-a,env-token-b"}
    settings = load_settings(CollectorSettings, environ=environ)
    assert load_tokens(settings.server) == {"env-token-a", "env-token-b"}


def test_no_token_without_anonymous_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=re.escape("server.tokens: no agent token configured")):
        load_tokens(ServerSettings())
    assert load_tokens(ServerSettings(allow_anonymous=True)) == frozenset()


def test_an_empty_tokens_file_counts_as_no_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match="no agent token"):
        load_tokens(ServerSettings(tokens_file=path))


def test_an_unreadable_tokens_file_names_the_file_not_its_content(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(ConfigError, match=re.escape(f"server.tokens_file: cannot read {missing}")):
        load_tokens(ServerSettings(tokens_file=missing))
    binary = tmp_path / "binary"
    binary.write_bytes(b"secret-\xff\xfe-token")
    with pytest.raises(ConfigError) as caught:
        load_tokens(ServerSettings(tokens_file=binary))
    assert "secret" not in str(caught.value)


def test_a_token_with_inner_whitespace_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load_tokens(ServerSettings(tokens=["good-token", "two words"]))
    assert "#2" in str(caught.value)
    assert "words" not in str(caught.value)


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("Bearer alpha-token", True),
        ("bearer beta-token", True),
        ("Bearer  alpha-token ", True),
        ("Bearer alpha-token-longer", False),
        ("Bearer alpha", False),
        ("Basic alpha-token", False),
        ("alpha-token", False),
        ("Bearer", False),
        ("Bearer Ã¼nicode", False),
        ("", False),
        (None, False),
    ],
)
def test_bearer_check(header: str | None, accepted: bool) -> None:
    assert BearerAuth(["alpha-token", "beta-token"]).check(header) is accepted


def test_anonymous_accepts_anything() -> None:
    assert BearerAuth([], allow_anonymous=True).check(None) is True
    assert BearerAuth([]).check("Bearer ") is False
