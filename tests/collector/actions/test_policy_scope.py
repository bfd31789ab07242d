"""Auto-release policies for an owner or a team, not only a namespace: the most specific
that names the workload wins (owner, namespace, team, default)."""

from __future__ import annotations

from collector.actions.settings import ActionSettings, PolicySettings
from collector.records import WorkloadRef

OWNER = PolicySettings(mode="enforce", release_after_seconds=600.0)
NAMESPACE = PolicySettings(mode="notify")
TEAM = PolicySettings(mode="enforce", release_after_seconds=7200.0)
SETTINGS = ActionSettings(
    policies={"owner:Deployment/ml/llm-serve": OWNER, "ml": NAMESPACE, "team:nlp": TEAM}
)


def ref(namespace: str, team: str = "", owner: str = "") -> WorkloadRef:
    return WorkloadRef(f"pod:{namespace}/p", "kubernetes_pod", "p", namespace, team, "", owner)


def test_the_owner_policy_wins_over_the_namespace_and_the_team() -> None:
    assert SETTINGS.policy_of(ref("ml", "nlp", "Deployment/ml/llm-serve")) is OWNER


def test_the_namespace_wins_over_the_team() -> None:
    assert SETTINGS.policy_of(ref("ml", "nlp", "Deployment/ml/other")) is NAMESPACE


def test_the_team_policy_applies_in_any_other_namespace() -> None:
    assert SETTINGS.policy_of(ref("research", "nlp")) is TEAM


def test_nothing_named_is_the_default() -> None:
    assert SETTINGS.policy_of(ref("research", "vision")) is SETTINGS.default
    # an empty owner or team never matches a policy named "owner:" or "team:"
    odd = ActionSettings(policies={"owner:": OWNER, "team:": TEAM})
    assert odd.policy_of(ref("research")) is odd.default
