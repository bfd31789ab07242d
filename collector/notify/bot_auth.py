"""Bot Framework's bearer tokens on the Teams bot endpoint (``POST /v1/answers/teams``),
verified the way Microsoft's "Authenticate requests from the Bot Connector service" says:

1. the OpenID metadata (``answers.teams_openid_url``, by default Bot Framework's) names
   the JWKS; its keys sign the tokens (RS256; the metadata's algorithms must include it);
2. the token's ``kid`` is one of those keys, and the key's ``endorsements``, where it has
   them, include the activity's ``channelId`` (``msteams``);
3. issuer ``https://api.botframework.com``, audience the bot's app id, not expired and
   already valid (5 minutes of clock skew allowed);
4. its ``serviceUrl`` claim, where present, equals the activity's ``serviceUrl``.

Keys are fetched through the one HTTP seam (an httpx transport), kept for a day, fetched
again at once for a key id not seen (a rotation), at most once a minute.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

from collector.notify.callbacks import CallbackRefused

BOT_FRAMEWORK_OPENID_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
ISSUER = "https://api.botframework.com"
CLOCK_SKEW_SECONDS = 300.0
KEYS_TTL_SECONDS = 24 * 3600.0
REFETCH_AFTER_SECONDS = 60.0
_TIMEOUT = dict.fromkeys(("connect", "read", "write", "pool"), 10.0)


class BotTokenVerifier:
    def __init__(
        self,
        app_id: str,
        openid_url: str,
        transport: httpx.BaseTransport,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app_id = app_id
        self.openid_url = openid_url
        self.transport = transport
        self.clock = clock
        self._keys: dict[str, dict[str, Any]] = {}
        self._fetched_at = float("-inf")

    def verify(self, authorization: str, activity: dict[str, Any]) -> dict[str, Any]:
        """The token's claims; CallbackRefused (saying why) when it is not good."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise CallbackRefused("Authorization: no Bearer token")
        try:
            kid = str(jwt.get_unverified_header(token).get("kid", ""))
        except jwt.PyJWTError as err:
            raise CallbackRefused(f"Authorization: not a JWT ({err})") from err
        jwk = self._key(kid)
        endorsements = jwk.get("endorsements")
        channel = str(activity.get("channelId", ""))
        if isinstance(endorsements, list) and channel not in endorsements:
            raise CallbackRefused(f"token key {kid!r} is not endorsed for channel {channel!r}")
        claims = self._decode(token, jwk)
        service_url = claims.get("serviceUrl")
        if service_url is not None and service_url != activity.get("serviceUrl"):
            raise CallbackRefused("token serviceUrl differs from the activity's serviceUrl")
        return claims

    def _decode(self, token: str, jwk: dict[str, Any]) -> dict[str, Any]:
        try:
            key = jwt.PyJWK(jwk, algorithm="RS256").key
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self.app_id,
                issuer=ISSUER,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as err:
            raise CallbackRefused(f"token refused: {err}") from err
        return claims

    def _key(self, kid: str) -> dict[str, Any]:
        now = self.clock()
        stale = now - self._fetched_at >= KEYS_TTL_SECONDS
        unknown = kid not in self._keys and now - self._fetched_at >= REFETCH_AFTER_SECONDS
        if stale or unknown:
            self._keys = self._fetch_keys()
            self._fetched_at = now
        if kid not in self._keys:
            raise CallbackRefused(f"token key {kid!r} is not in the Bot Framework's JWKS")
        return self._keys[kid]

    def _fetch_keys(self) -> dict[str, dict[str, Any]]:
        metadata = self._get(self.openid_url)
        algorithms = metadata.get("id_token_signing_alg_values_supported", ["RS256"])
        if "RS256" not in algorithms:
            raise CallbackRefused(f"OpenID metadata: RS256 not among {algorithms}")
        jwks = self._get(str(metadata.get("jwks_uri", "")))
        keys = jwks.get("keys", [])
        return {str(k.get("kid")): k for k in keys if isinstance(k, dict) and k.get("kid")}

    def _get(self, url: str) -> dict[str, Any]:
        if not url.startswith(("https://", "http://")):
            raise CallbackRefused(f"OpenID metadata: bad URL {url!r}")
        request = httpx.Request("GET", url, extensions={"timeout": _TIMEOUT})
        try:
            response = self.transport.handle_request(request)
            try:
                response.read()
            finally:
                response.close()
        except httpx.HTTPError as err:
            raise CallbackRefused(f"OpenID metadata: {type(err).__name__}") from err
        if response.status_code != 200:
            raise CallbackRefused(f"OpenID metadata: HTTP {response.status_code} from {url}")
        try:
            body = json.loads(response.content)
        except ValueError as err:
            raise CallbackRefused(f"OpenID metadata: not JSON from {url}") from err
        if not isinstance(body, dict):
            raise CallbackRefused(f"OpenID metadata: not a JSON object from {url}")
        return body
