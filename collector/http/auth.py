"""Agent and API tokens: where they come from and how a request is checked.

Tokens come from ``server.tokens`` (which the settings loader also fills from
``GPUFLEET_SERVER__TOKENS``, comma separated) and ``server.tokens_file`` (one token per
line, ``#`` comment lines and blank lines ignored). Both sources add up. Errors name the
setting and the file, never a token.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection

from collector.config import ServerSettings
from gpufleet.settings import ConfigError


def load_tokens(settings: ServerSettings) -> frozenset[str]:
    """Every accepted token; ConfigError when none is set and anonymous access is off."""
    tokens = [token.strip() for token in settings.tokens]
    if settings.tokens_file is not None:
        tokens += _read_tokens_file(settings)
    for number, token in enumerate(tokens, start=1):
        if any(char.isspace() for char in token.strip()):
            raise ConfigError(f"server.tokens: token #{number} contains whitespace")
    accepted = frozenset(token for token in tokens if token)
    if not accepted and not settings.allow_anonymous:
        raise ConfigError(
            "server.tokens: no agent token configured; set server.tokens_file or "
            "GPUFLEET_SERVER__TOKENS, or server.allow_anonymous: true for a local demo"
        )
    return accepted


def _read_tokens_file(settings: ServerSettings) -> list[str]:
    path = settings.tokens_file
    try:
        text = path.read_text(encoding="utf-8") if path is not None else ""
    except (OSError, UnicodeDecodeError) as err:
        why = getattr(err, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"server.tokens_file: cannot read {path}: {why}") from err
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


class BearerAuth:
    """Checks ``Authorization: Bearer <token>`` against the accepted tokens.

    With ``allow_anonymous`` every request passes and the header is not looked at.
    """

    def __init__(self, tokens: Collection[str], allow_anonymous: bool = False) -> None:
        self._tokens = tuple(token.encode() for token in tokens)
        self.allow_anonymous = allow_anonymous

    def check(self, authorization: str | None) -> bool:
        """True when the header carries an accepted token, or anonymous access is on."""
        if self.allow_anonymous:
            return True
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return False
        candidate = presented.strip().encode()
        # compare against every token so timing does not tell which one nearly matched
        matches = [hmac.compare_digest(candidate, token) for token in self._tokens]
        return any(matches)
