"""Where tokens come from (collector/http/tokens.py), what the token file says (scopes,
node bindings, names), and how a header is checked (collector/http/auth.py)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from collector.config import CollectorSettings, ServerSettings
from collector.http.auth import BearerAuth, Scope, load_tokens
from gpufleet.settings import ConfigError, load_settings


def secrets(tokens: object) -> set[str]:
    return {token.secret for token in tokens}  # type: ignore[attr-defined]


def test_tokens_from_settings_and_file_add_up(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# agents of rack 1\nfile-token-1\n\n  file-token-2  \n# old: revoked\n")
    settings = ServerSettings(tokens=["inline-token", " "], tokens_file=path)
    assert secrets(load_tokens(settings)) == {"inline-token", "file-token-1", "file-token-2"}


def test_tokens_from_the_environment_reach_the_settings() -> None:
    environ = {"GPUFLEET_SERVER__TOKENS": "env-token-a,env-token-b"}
    settings = load_settings(CollectorSettings, environ=environ)
    assert secrets(load_tokens(settings.server)) == {"env-token-a", "env-token-b"}


def test_no_token_without_anonymous_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=re.escape("server.tokens: no agent token configured")):
        load_tokens(ServerSettings())
    assert load_tokens(ServerSettings(allow_anonymous=True)) == ()


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


TOKEN_FILE = """\
# agents: one token per node, or one per rack bound by a glob
tok-agent-a  agent  nodes=gpu-node-a  name=agent-a
tok-rack-7   agent  nodes=gpu-node-7*,gpu-spare  name=rack-7
tok-grafana  read
tok-ops      read,admin  name=ops-console
tok-am       alertmanager  name=alertmanager
tok-prom     metrics  name=prometheus
tok-legacy
"""


def test_the_token_file_gives_each_token_its_scopes_nodes_and_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens"
    path.write_text(TOKEN_FILE)
    tokens = {t.secret: t for t in load_tokens(ServerSettings(tokens_file=path))}
    agent, rack, grafana, ops = (tokens[s] for s in ("tok-agent-a", "tok-rack-7", "tok-grafana",
                                                     "tok-ops"))  # fmt: skip
    assert (agent.name, agent.scopes, agent.nodes) == ("agent-a", {Scope.AGENT}, ("gpu-node-a",))
    assert rack.binding().allows("gpu-node-71") and rack.binding().allows("gpu-spare")
    assert not rack.binding().allows("gpu-node-8") and not agent.binding().allows("gpu-node-ab")
    assert (grafana.name, grafana.scopes) == ("tokens_file line 4", {Scope.READ})
    assert ops.scopes == {Scope.READ, Scope.ADMIN}
    assert tokens["tok-am"].scopes == {Scope.ALERTMANAGER}
    assert tokens["tok-prom"].scopes == {Scope.METRICS}
    # a bare line of the older format may do everything, as before, and says so once
    legacy = tokens["tok-legacy"]
    assert legacy.unscoped and legacy.scopes == set(Scope) and legacy.binding().allows("any")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "tokens_file line 8 has no scope: it may do everything (post batches as any node, "
        "read, dismiss, post alerts); give it scopes (collector/http/tokens.py, README "
        "'Tokens and scopes')"
    ]
    assert "tok-" not in caplog.text
    assert "tok-" not in repr(legacy)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("sekrit agent", "an agent token needs nodes=<glob>"),
        ("sekrit read nodes=gpu-a", "nodes= binds agent tokens only"),
        ("sekrit nodes=gpu-a", "nodes= without a scope"),
        ("sekrit reed", "field 2 is not a list of scopes"),
        ("sekrit read,,admin", "field 2 is not a list of scopes"),
        ("sekrit agent nodes=", "field 3: nodes= needs node names or globs"),
        ("sekrit read read", "field 3 is not understood"),
        ("sekrit read colour=blue", "field 3 is not understood"),
        ("sekrit read name=", "field 3: name= needs a printable name"),
    ],
)
def test_a_bad_token_line_names_its_line_and_field_never_the_token(
    tmp_path: Path, line: str, words: str
) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# header\ngood-token read\n{line}\n")
    with pytest.raises(ConfigError) as caught:
        load_tokens(ServerSettings(tokens_file=path))
    message = str(caught.value)
    assert message.startswith(f"server.tokens_file {path} line 3: "), message
    assert words in message
    assert "sekrit" not in message and "reed" not in message


def test_the_same_token_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("same-token agent nodes=a name=first\nother read\nsame-token read\n")
    with pytest.raises(ConfigError, match="tokens_file line 3 repeats the token of first"):
        load_tokens(ServerSettings(tokens_file=path))


def test_a_scoped_token_from_the_environment() -> None:
    environ = {"GPUFLEET_SERVER__TOKENS": "env-agent agent nodes=gpu-*,env-reader read"}
    [agent, reader] = load_tokens(load_settings(CollectorSettings, environ=environ).server)
    assert (agent.scopes, agent.nodes, reader.scopes) == ({Scope.AGENT}, ("gpu-*",), {Scope.READ})
