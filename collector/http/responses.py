"""JSON responses, and the error shape ``{"error", "field", "reason"}`` every route answers with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from collector.backend import ErrorResponse

Handler = Callable[[Request], Awaitable[Response]]
ENCODER = msgspec.json.Encoder(enc_hook=str)  # free-form evidence values fall back to str


def json_response(value: Any, status_code: int = 200, **headers: str) -> Response:
    body = ENCODER.encode(value)
    return Response(body, status_code, headers or None, media_type="application/json")


def error_response(
    status_code: int, error: str, field: str | None = None, reason: str | None = None
) -> Response:
    return json_response(ErrorResponse(error, field, reason), status_code)
