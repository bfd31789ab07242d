"""The collector's tokens and what each may do: scopes, node bindings, names.

One token per line of ``server.tokens_file`` (``#`` comment lines and blank lines ignored),
written by hand::

    <token> [<scope>[,<scope>...]] [nodes=<glob>[,<glob>...]] [name=<id>]

    Zm9vYmFy...  agent  nodes=gpu-node-a                name=agent-gpu-node-a
    YmF6cXV4...  agent  nodes=gpu-node-*                name=agents-rack-7
    cXV1eHh5...  read                                   name=grafana
    eHl6enp6...  read,admin                             name=ops-console
    aGVsbG8h...  alertmanager                           name=alertmanager
    d29ybGQh...  metrics                                name=prometheus

Scopes: ``agent`` (``POST /v1/batches``, only for the nodes its ``nodes=`` globs match:
``fnmatch`` patterns, ``*`` for any node; a batch for another node is refused 403),
``read`` (every ``GET /v1/...`` route, the console's data), ``admin`` (whatever changes
state: dismissing a recommendation), ``alertmanager`` (``POST /v1/alertmanager``) and
``metrics`` (``GET /metrics`` when ``server.metrics_require_token``). ``name=`` is how logs,
errors and refusals name the token (never by its value); the default is
``tokens_file line N`` (``token #N`` for an entry of ``server.tokens``).

A bare token (no scope: every line of the older one-token-per-line format, and each entry
of ``server.tokens`` / ``GPUFLEET_SERVER__TOKENS`` written as a plain token) may do
everything, as any node, as it did before scopes existed; the collector logs one WARNING
at start for each. Entries of ``server.tokens`` take the same syntax as a file line; in
the environment variable commas separate tokens, so one scope and one glob each there.

Errors name the setting and the line (or entry number), never a token or a word of it.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from collector.config import ServerSettings
from collector.node_binding import ANY_NODE, NodeBinding
from gpufleet.settings import ConfigError

log = logging.getLogger(__name__)


class Scope(enum.StrEnum):
    """What a token may do; each route needs one."""

    AGENT = "agent"
    READ = "read"
    ADMIN = "admin"
    ALERTMANAGER = "alertmanager"
    METRICS = "metrics"


EVERY_SCOPE = frozenset(Scope)


@dataclass(frozen=True)
class Token:
    """An accepted token: its value (never logged: ``repr`` leaves it out), its scopes, the
    nodes it may post batches as, and the name logs use."""

    secret: str = field(repr=False)
    name: str
    scopes: frozenset[Scope] = EVERY_SCOPE
    nodes: tuple[str, ...] = (ANY_NODE,)
    #: a bare token: every scope because none was given (the older format)
    unscoped: bool = True

    def may(self, scope: Scope) -> bool:
        return scope in self.scopes

    def binding(self) -> NodeBinding:
        return NodeBinding(self.name, self.nodes)


def load_tokens(settings: ServerSettings) -> tuple[Token, ...]:
    """Every accepted token, from ``server.tokens`` then ``server.tokens_file``; ConfigError
    when none is set and anonymous access is off. Logs one WARNING per bare token."""
    tokens = [
        parse_token(entry, f"server.tokens: token #{number}", f"token #{number}")
        for number, entry in enumerate(settings.tokens, start=1)
        if entry.strip()
    ]
    if settings.tokens_file is not None:
        tokens += _read_tokens_file(settings)
    _refuse_repeats(tokens)
    if not tokens and not settings.allow_anonymous:
        raise ConfigError(
            "server.tokens: no agent token configured; set server.tokens_file or "
            "GPUFLEET_SERVER__TOKENS, or server.allow_anonymous: true for a local demo"
        )
    for token in tokens:
        if token.unscoped:
            log.warning(
                "%s has no scope: it may do everything (post batches as any node, read, "
                "dismiss, post alerts); give it scopes (collector/http/tokens.py, README "
                "'Tokens and scopes')",
                token.name,
            )
    return tuple(tokens)


def parse_token(line: str, where: str, default_name: str) -> Token:
    """One line of the format above; ``where`` starts each error message."""
    secret, *fields = line.split()
    scopes: frozenset[Scope] | None = None
    nodes: tuple[str, ...] | None = None
    name = default_name
    for number, word in enumerate(fields, start=2):
        key, eq, value = word.partition("=")
        if eq and key == "nodes":
            nodes = _globs(value, where, number)
        elif eq and key == "name":
            name = _name(value, where, number)
        elif not eq and scopes is None:
            scopes = _scopes(word, where, number)
        else:
            raise ConfigError(
                f"{where}: field {number} is not understood; after the token come scopes "
                f"({', '.join(Scope)}), nodes=<glob>,... and name=<id>, each once"
            )
    if scopes is None:
        if nodes is not None:
            raise ConfigError(f"{where}: nodes= without a scope; write 'agent nodes=...'")
        return Token(secret, name)
    if nodes is not None and Scope.AGENT not in scopes:
        raise ConfigError(f"{where}: nodes= binds agent tokens only; add the agent scope")
    if Scope.AGENT in scopes and nodes is None:
        raise ConfigError(
            f"{where}: an agent token needs nodes=<glob>,... (the node names it may post "
            "batches as; nodes=* for any node)"
        )
    return Token(secret, name, scopes, nodes or (ANY_NODE,), unscoped=False)


def _scopes(word: str, where: str, number: int) -> frozenset[Scope]:
    names = word.split(",")
    known = {scope.value for scope in Scope}
    if not all(names) or not set(names) <= known:
        # the word is not echoed: a token mistyped with a space would end up here
        raise ConfigError(
            f"{where}: field {number} is not a list of scopes; scopes are {', '.join(Scope)}"
        )
    return frozenset(Scope(name) for name in names)


def _globs(value: str, where: str, number: int) -> tuple[str, ...]:
    globs = tuple(value.split(","))
    if not all(globs):
        raise ConfigError(f"{where}: field {number}: nodes= needs node names or globs")
    return globs


def _name(value: str, where: str, number: int) -> str:
    if not value or not value.isprintable():
        raise ConfigError(f"{where}: field {number}: name= needs a printable name")
    return value


def _read_tokens_file(settings: ServerSettings) -> list[Token]:
    path = settings.tokens_file
    try:
        text = path.read_text(encoding="utf-8") if path is not None else ""
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"server.tokens_file: cannot read {path}: {why}") from err
    return [
        parse_token(line, f"server.tokens_file {path} line {number}", f"tokens_file line {number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _refuse_repeats(tokens: list[Token]) -> None:
    """The same token twice would make its scopes depend on which line matched first."""
    first: dict[str, str] = {}
    for token in tokens:
        if token.secret in first:
            raise ConfigError(
                f"server.tokens: {token.name} repeats the token of {first[token.secret]}; "
                "give each token one line (with all its scopes)"
            )
        first[token.secret] = token.name
