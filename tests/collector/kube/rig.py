"""The metadata reader under test: the real ``kubernetes`` client against FakeKubeApi."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collector.actions.kubernetes import api_client
from collector.kube.enrich import keys_of
from collector.kube.settings import KubeMetadataSettings
from collector.kube.store import MetadataStore
from collector.kube.watcher import MetadataWatcher
from tests.fakes.kube_api import TOKEN, FakeKubeApi


def reader_settings(fake: FakeKubeApi, tmp_path: Path, **overrides: Any) -> KubeMetadataSettings:
    token = tmp_path / "token"
    if not token.exists():
        token.write_text(TOKEN + "\n", encoding="utf-8")
    values: dict[str, Any] = {
        "enabled": True,
        "host": fake.host,
        "token_file": token,
        "watch_timeout_seconds": 1,
        "backoff_initial_seconds": 0.05,
        "backoff_max_seconds": 0.2,
    }
    return KubeMetadataSettings(**{**values, **overrides})


@contextmanager
def running(settings: KubeMetadataSettings) -> Iterator[MetadataWatcher]:
    store = MetadataStore(
        keys_of(settings), settings.pod_labels, settings.max_pods, settings.max_owners
    )
    watcher = MetadataWatcher(api_client(settings.connection()), store, settings)
    watcher.start()
    try:
        yield watcher
    finally:
        watcher.close()


def wait_for(check: Callable[[], object], timeout: float = 10.0) -> None:
    """Until ``check()`` is true; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        time.sleep(0.02)
