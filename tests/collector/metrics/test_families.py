"""The families written from label tuples are byte for byte prometheus_client's, and the
collector exports no per-GPU reading the agent already exports."""

from __future__ import annotations

import math

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from agent.metrics.catalogue import CATALOGUE as AGENT_CATALOGUE
from collector.metrics import catalogue as cat
from collector.metrics.families import Family, SeriesWriter, filled, render_families

TRICKY = ("back\\slash", "new\nline", 'quo"te', "ünïcode", "", "plain")
VALUES = (0.0, 1.0, 2.5e-7, 123456789.0, 1e21, -3.0, math.inf, -math.inf)


class _Fixed:
    def __init__(self, families: list[Family]) -> None:
        self.metrics = [filled(f.spec, f.values) for f in families]

    def collect(self) -> list:  # type: ignore[type-arg]
        return self.metrics


def families() -> list[Family]:
    out = []
    for i, spec in enumerate(cat.CATALOGUE):
        n = len(spec.labels)
        values = {
            tuple(TRICKY[(i + j + k) % len(TRICKY)] + str(k) for j in range(n)): VALUES[k % 8]
            for k in range(3 if n else 1)
        }
        out.append(Family(spec, values))
    out.append(Family(cat.GPU_STATE, {}))  # a family with nothing to say keeps its HELP
    return out


@pytest.mark.parametrize("openmetrics", [False, True])
def test_every_catalogue_family_renders_as_prometheus_client_does(openmetrics: bool) -> None:
    ours = render_families(families(), openmetrics).encode()
    if openmetrics:
        theirs = generate_openmetrics(_Fixed(families())).removesuffix(b"# EOF\n")
    else:
        theirs = generate_latest(_Fixed(families()))  # type: ignore[arg-type]
    assert ours == theirs


def test_nan_renders_as_prometheus_client_does() -> None:
    family = Family(cat.LAG, {(): math.nan})
    assert render_families([family], False).encode() == generate_latest(_Fixed([family]))  # type: ignore[arg-type]


def test_the_collector_exports_no_series_of_the_agents() -> None:
    agent = {spec.name for spec in AGENT_CATALOGUE}
    assert agent.isdisjoint(spec.name for spec in cat.CATALOGUE)
    # per GPU, the collector keeps only its own judgement: state and idle time
    per_gpu = {spec.name for spec in cat.CATALOGUE if "uuid" in spec.labels}
    assert per_gpu == {cat.GPU_STATE.name, cat.GPU_IDLE.name}


@pytest.mark.parametrize("openmetrics", [False, True])
def test_a_writer_renders_again_as_prometheus_client_does_and_forgets_gone_series(
    openmetrics: bool,
) -> None:
    theirs = generate_openmetrics if openmetrics else generate_latest
    writer = SeriesWriter()
    first = families()
    # the same series with other values, one series gone and a new, tricky one per family
    second = [
        Family(
            f.spec,
            {
                **{labels: v * 3 + 1 for labels, v in list(f.values.items())[1:]},
                tuple(f'x"\\{i}\n' for i in range(len(f.spec.labels))): 7.25,
            },
        )
        for f in first
    ]
    for round_families in (first, second, first):
        ours = writer.render(round_families, openmetrics).encode()
        assert ours == theirs(_Fixed(round_families)).removesuffix(b"# EOF\n")  # type: ignore[arg-type]
    writer.render(second, openmetrics)
    kept = {name: set(heads) for name, heads in writer._series.items()}
    rendered: dict[str, set[tuple[str, ...]]] = {}
    for f in second:  # GPU_STATE is there twice, once empty
        rendered.setdefault(f.spec.name, set()).update(f.values)
    assert kept == rendered


def test_a_writer_writes_a_changed_sign_of_zero_and_nan_again() -> None:
    writer = SeriesWriter()
    for value in (0.0, -0.0, 0, math.nan, math.nan, 1, 1.0, True, -0.0):
        family = Family(cat.LAG, {(): value})
        ours = writer.render([family], False).encode()
        assert ours == generate_latest(_Fixed([family]))  # type: ignore[arg-type]
