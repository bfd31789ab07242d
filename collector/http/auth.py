"""How a request is checked: its bearer token, the scope its route needs, the failure limit.

Tokens and their scopes come from ``collector.http.tokens.load_tokens`` (the token file's
format is described there). Every guarded route names the one scope it needs; a request
is answered

- 429 with ``Retry-After`` when its client address has failed too often
  (``collector.http.auth_limit``), before its token is looked at;
- 401 with ``WWW-Authenticate`` without a token or with one the collector does not know
  (a failure: it counts against the address);
- 403 ``insufficient_scope`` with a known token that lacks the scope, naming the token by
  its name and the scope it lacks.

Each refusal is counted (``gpufleet_collector_auth_failures_total{reason}``); neither the
token nor the address is a label, and no token is ever logged. Tokens are compared in
constant time against every accepted token, so timing does not tell which one nearly
matched. With ``server.allow_anonymous`` every request passes, as every scope.
"""

from __future__ import annotations

import hmac
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable

from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from collector.config import ServerSettings
from collector.http.auth_limit import FailureLimiter
from collector.http.responses import Handler, error_response
from collector.http.tokens import Scope, Token, load_tokens, parse_token
from collector.metrics.catalogue import AUTH_FAILURES
from collector.metrics.exporter import filled

__all__ = ["AuthExporter", "BearerAuth", "Gate", "Scope", "Token", "load_tokens"]

FAILURE_REASONS = ("missing", "invalid", "scope", "rate_limited")
ANONYMOUS = Token("", "anonymous")
CHALLENGE = 'Bearer realm="gpufleet"'


def as_tokens(tokens: Iterable[str | Token]) -> tuple[Token, ...]:
    """Tokens as given to the app: parsed ones as they are, plain strings as bare tokens."""
    return tuple(
        t if isinstance(t, Token) else parse_token(t, f"token #{n}", f"token #{n}")
        for n, t in enumerate(tokens, start=1)
    )


class BearerAuth:
    """Finds the accepted token an ``Authorization: Bearer <token>`` header carries."""

    def __init__(self, tokens: Iterable[str | Token], allow_anonymous: bool = False) -> None:
        self.tokens = as_tokens(tokens)
        self._secrets = tuple(token.secret.encode() for token in self.tokens)
        self.allow_anonymous = allow_anonymous

    def identify(self, authorization: str | None) -> Token | None:
        """The token the header carries; None when it carries none the collector knows.
        With anonymous access on, every header (or none) is ANONYMOUS, of every scope."""
        if self.allow_anonymous:
            return ANONYMOUS
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return None
        candidate = presented.strip().encode()
        # compare against every token so timing does not tell which one nearly matched
        matches = [hmac.compare_digest(candidate, secret) for secret in self._secrets]
        return next((t for t, hit in zip(self.tokens, matches, strict=True) if hit), None)

    def check(self, authorization: str | None) -> bool:
        """True when the header carries an accepted token, or anonymous access is on."""
        return self.identify(authorization) is not None


class Gate:
    """BearerAuth, the failure limiter and the failure counters, shared by every guarded
    route of one process (the API, the console's data, the Alertmanager webhook)."""

    def __init__(self, auth: BearerAuth, limiter: FailureLimiter) -> None:
        self.auth = auth
        self.limiter = limiter
        self._failures: Counter[str] = Counter()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, tokens: Gate | Collection[str | Token], server: ServerSettings) -> Gate:
        """``tokens`` as a Gate: itself, or a new one over those tokens (tests, demos)."""
        if isinstance(tokens, Gate):
            return tokens
        limiter = FailureLimiter(server.auth_failures_per_second, server.auth_failure_burst)
        return cls(BearerAuth(tokens, server.allow_anonymous), limiter)

    def guard(
        self,
        scope: Scope,
        handler: Handler,
        refused: Callable[[], Awaitable[None]] | None = None,
    ) -> Handler:
        """``handler`` for requests whose token has ``scope`` (``request.state.token``
        holds it); ``refused`` runs for every request the gate refuses."""

        async def guarded(request: Request) -> Response:
            token_or_refusal = self.admit(request, scope)
            if isinstance(token_or_refusal, Token):
                request.state.token = token_or_refusal
                return await handler(request)
            if refused is not None:
                await refused()
            return token_or_refusal

        return guarded

    def admit(self, request: Request, scope: Scope) -> Token | Response:
        """The request's token when it may use ``scope``; else the refusal to answer."""
        if self.auth.allow_anonymous:
            return ANONYMOUS
        address = request.client.host if request.client is not None else ""
        retry_after = self.limiter.retry_after(address)
        if retry_after is not None:
            self._count("rate_limited")
            response = error_response(
                429,
                f"too many failed authentications from this address; retry in {retry_after} s "
                "with a valid token",
                None,
                "rate_limited",
            )
            response.headers["Retry-After"] = str(retry_after)
            return response
        header = request.headers.get("authorization")
        token = self.auth.identify(header)
        if token is None:
            self.limiter.failed(address)
            self._count("invalid" if header else "missing")
            return _challenge(401, "missing or invalid bearer token", "unauthorized",
                              ', error="invalid_token"' if header else "")  # fmt: skip
        if not token.may(scope):
            self._count("scope")
            message = (
                f"token {token.name!r} has scopes {', '.join(sorted(token.scopes))}; this "
                f"route needs the {scope} scope"
            )
            return _challenge(403, message, "forbidden", ', error="insufficient_scope"')
        return token

    def failures(self) -> dict[str, int]:
        with self._lock:
            return {reason: self._failures[reason] for reason in FAILURE_REASONS}

    def _count(self, reason: str) -> None:
        with self._lock:
            self._failures[reason] += 1


def _challenge(status: int, message: str, reason: str, error: str) -> Response:
    response = error_response(status, message, None, reason)
    response.headers["WWW-Authenticate"] = CHALLENGE + error
    return response


class AuthExporter(Collector):
    """``gpufleet_collector_auth_failures_total{reason}``, every reason at 0 until it happens."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def describe(self) -> list[Metric]:
        return [filled(AUTH_FAILURES, {})]

    def collect(self) -> list[Metric]:
        counts = self.gate.failures()
        return [filled(AUTH_FAILURES, {(reason,): float(n) for reason, n in counts.items()})]
