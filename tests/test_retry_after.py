"""``Retry-After`` in both of its forms, measured against the answer's own ``Date``."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from gpufleet.retry_after import retry_after_seconds

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "date", "seconds"),
    [
        ("120", None, 120.0),
        ("0", None, 0.0),
        ("-5", None, 0.0),
        (formatdate(NOW + 30, usegmt=True), None, 30.0),
        (formatdate(NOW + 30, usegmt=True), formatdate(NOW - 600, usegmt=True), 630.0),
        # the client's clock is 10 min ahead of the server's: its Date still gives 30 s
        (formatdate(NOW - 600 + 30, usegmt=True), formatdate(NOW - 600, usegmt=True), 30.0),
        (formatdate(NOW - 60, usegmt=True), None, 0.0),
        ("soon", None, None),
        ("", None, None),
        (None, None, None),
        ("inf", None, None),
    ],
)
def test_retry_after_in_seconds(value: str | None, date: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW, date) == seconds
