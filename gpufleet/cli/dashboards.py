"""``gpufleet dashboards``: write the Grafana dashboards, or publish them to a Grafana.

``generate`` writes dashboards/*.json and dashboards/README.md from the Python definitions.
``publish --url URL --token-file FILE`` creates the folder and uploads every dashboard
through Grafana's HTTP API (a service-account token with the Editor role is enough).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from gpufleet.dashboards.build import all_dashboards, write_all
from gpufleet.dashboards.publish import (
    FOLDER_UID,
    GrafanaPublisher,
    PublishError,
    grafana_client,
)
from gpufleet.settings import ConfigError, read_secret


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "dashboards", help="generate or publish Grafana dashboards", description=__doc__
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    gen = actions.add_parser("generate", help="write dashboards/*.json and README.md")
    gen.add_argument("--out", type=Path, default=Path("dashboards"), help="target directory")
    gen.set_defaults(run=run_generate)
    pub = actions.add_parser("publish", help="upload every dashboard to Grafana")
    pub.add_argument("--url", required=True, help="Grafana base URL, e.g. http://grafana:3000")
    pub.add_argument("--token-file", type=Path, required=True, help="service-account token")
    pub.add_argument("--folder-uid", default=FOLDER_UID, help="Grafana folder uid")
    pub.add_argument("--from-dir", type=Path, help="upload these *.json files instead")
    pub.set_defaults(run=run_publish)


def run_generate(args: argparse.Namespace) -> int:
    written = write_all(args.out)
    for path in written:
        print(path)
    print(f"gpufleet dashboards generate: wrote {len(written)} files to {args.out.resolve()} "
          "(--out chooses the directory)", file=sys.stderr)  # fmt: skip
    return 0


def _load(directory: Path | None) -> dict[str, dict[str, Any]]:
    if directory is None:
        return all_dashboards()
    boards: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            boards[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ConfigError(f"--from-dir: cannot read dashboard {path}: {err}") from err
    if not boards:
        raise ConfigError(f"--from-dir: no *.json dashboards in {directory}")
    return boards


def run_publish(args: argparse.Namespace) -> int:
    token = read_secret(None, args.token_file, "--token-file")
    boards = _load(args.from_dir)
    with grafana_client(args.url, token or "") as client:
        publisher = GrafanaPublisher(client, args.folder_uid)
        try:
            published = publisher.publish(boards, "gpufleet dashboards publish")
        except (PublishError, httpx.HTTPError) as err:
            print(f"gpufleet dashboards publish: {err}", file=sys.stderr)
            return 1
    for item in published:
        print(f"{item.uid}\tversion {item.version}\t{args.url.rstrip('/')}{item.url}")
    return 0
