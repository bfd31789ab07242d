"""The "Why it wastes" panels: each cause shown with the advice the verdicts give."""

from __future__ import annotations

from collector.analysis.verdicts import ADVICE, Cause
from gpufleet.dashboards.build import all_dashboards
from gpufleet.dashboards.why import ADVICE as SHOWN
from gpufleet.dashboards.why import cause_sentences


def test_the_dashboard_advises_what_the_verdicts_advise_for_every_cause() -> None:
    assert {cause.value: advice for cause, advice in ADVICE.items()} == SHOWN
    assert set(SHOWN) == {c.value for c in Cause}
    options = cause_sentences()["options"]
    assert options["input_bound"]["text"] == "input-bound: try more data-loader workers or CPU"


def test_the_panels_are_on_the_idle_waste_dashboard_with_the_mapping() -> None:
    panels = {p["title"]: p for p in all_dashboards()["idle-waste"]["panels"]}
    table = panels["Why it wastes: the most bottlenecked workloads"]
    assert table["fieldConfig"]["defaults"]["mappings"] == [cause_sentences()]
    for title in ("Money on broken GPUs by node ($currency/h)", "GPUs missing per node"):
        assert title in panels
