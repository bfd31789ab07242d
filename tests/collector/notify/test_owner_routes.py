"""A recommendation's event names the workload's owner, so a route can send everything
about one Deployment (or PyTorchJob, Notebook ...) to the channel of those who run it."""

from __future__ import annotations

import dataclasses

from collector.notify import phrases
from collector.notify.changes import FleetIndex, changes
from collector.notify.messages import fields, structured
from collector.notify.routing import route
from collector.notify.settings import NotificationSettings, RouteSettings
from tests.collector.notify.rig import T0, index_for, release_rec

SERVE = "Deployment/ml/llm-serve"


def owned(index: FleetIndex, owners: dict[str, str]) -> FleetIndex:
    refs = {k: dataclasses.replace(r, owner=owners.get(k, "")) for k, r in index.workloads.items()}
    return dataclasses.replace(index, workloads=refs)


def test_a_route_on_the_owner_label_gets_only_that_owners_events() -> None:
    serve, other = release_rec(1), release_rec(2)
    index = owned(index_for(serve, other), {serve.workload_key: SERVE})
    events = [e for e, _ in changes([serve, other], {}, NotificationSettings(), index, T0)]
    routes = [
        RouteSettings(channels=["serving-oncall"], labels={"owner": SERVE}),
        RouteSettings(channels=["ops"]),
    ]
    chosen = {e.facts.workload: route(e, routes, ["serving-oncall", "ops"]) for e in events if e}
    assert chosen == {
        serve.workload_key: ["serving-oncall", "ops"],
        other.workload_key: ["ops"],
    }


def test_a_workload_without_an_owner_has_no_owner_label() -> None:
    rec = release_rec(3)
    ((event, _),) = changes([rec], {}, NotificationSettings(), index_for(rec), T0)
    assert event is not None and "owner" not in event.labels


def test_the_message_names_the_owner_beside_the_pod_and_scripts_get_it() -> None:
    rec = release_rec(4)
    index = owned(index_for(rec), {rec.workload_key: SERVE})
    ((event, _),) = changes([rec], {}, NotificationSettings(), index, T0)
    assert event is not None
    words = phrases.for_language("en")
    (workload,) = [
        value for label, value in fields(event, words) if label == words.label["workload"]
    ]
    assert workload.endswith(f" ({SERVE})")
    assert structured(event, {})["owned_by"] == SERVE
