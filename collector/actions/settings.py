"""The ``actions`` settings section: auto-release policy per namespace or Slurm partition.

Defaults are safe: every policy is ``off`` and ``dry_run`` is true, so nothing is ever
released until an operator turns a policy to ``enforce`` and dry-run off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from collector.records import WorkloadRef
from gpufleet.settings import ConfigError

Mode = Literal["off", "notify", "enforce"]
RemedyMode = Literal["off", "dry_run", "enforce"]
RemedyVia = Literal["auto", "kubernetes", "slurm"]
#: the broken-GPU conditions a node may be taken out of service for (throttled is not one:
#: a throttled GPU still works)
REMEDY_CONDITIONS = ("off_bus", "xid", "ecc", "missing")


@dataclass(frozen=True)
class PolicySettings:
    #: off: nothing; notify: warnings and a notice at the deadline; enforce: then act
    mode: Mode = "off"
    #: record and announce what would be done, do nothing
    dry_run: bool = True
    #: idle this long (from the start of the idle episode) -> the deadline
    release_after_seconds: float = 4 * 3600.0
    #: warn at these fractions of the way to the deadline
    warn_at: list[float] = field(default_factory=lambda: [0.5, 0.9])
    #: never act on a workload seen for less than this long
    min_runtime_seconds: float = 3600.0

    def __post_init__(self) -> None:
        if self.release_after_seconds <= 0:
            raise ConfigError("actions: release_after_seconds must be > 0")
        if any(not 0 < f < 1 for f in self.warn_at):
            raise ConfigError(f"actions: warn_at fractions must be in (0, 1), got {self.warn_at}")


@dataclass(frozen=True)
class KubernetesSettings:
    enabled: bool = False
    #: API server URL; empty = in-cluster service account (or ``kubeconfig``)
    host: str = ""
    kubeconfig: Path | None = None
    token_file: Path | None = None
    ca_file: Path | None = None
    verify_tls: bool = True
    #: scale the pod's Deployment/StatefulSet to zero instead of deleting the pod
    scale_owners: bool = True
    grace_period_seconds: int = 30


@dataclass(frozen=True)
class SlurmSettings:
    enabled: bool = False
    scancel_path: str = "scancel"
    #: empty: cancel the job; else ``--signal=<signal>`` (e.g. TERM)
    signal: str = ""
    #: the option that carries the reason, where your scancel has one (e.g. ``--reason``);
    #: empty = the reason is only recorded in the ledger and announced
    reason_option: str = ""
    timeout_seconds: float = 30.0
    #: asked for the job's state before and after scancel (which exits 0 for any id)
    scontrol_path: str = "scontrol"
    #: how long a cancelled job may take to leave RUNNING before the release is a failure
    verify_seconds: float = 10.0


@dataclass(frozen=True)
class WebhookActionSettings:
    url: str = field(default="", repr=False)
    url_file: Path | None = None
    secret: str = field(default="", repr=False)
    secret_file: Path | None = None
    timeout_seconds: float = 10.0


@dataclass(frozen=True)
class RemediationSettings:
    """Taking a node with broken GPUs out of service (collector/actions/remediation.py)."""

    #: off: nothing; dry_run: record and announce what would be done; enforce: cordon
    #: (Kubernetes) or drain (Slurm) the node
    mode: RemedyMode = "off"
    #: auto: by the node's workloads (pods: Kubernetes, Slurm jobs: Slurm), else the one
    #: executor enabled (actions.kubernetes / actions.slurm)
    via: RemedyVia = "auto"
    #: the conditions that take a node out: off_bus, xid, ecc, missing
    conditions: list[str] = field(default_factory=lambda: list(REMEDY_CONDITIONS))

    def __post_init__(self) -> None:
        if self.mode not in ("off", "dry_run", "enforce"):
            raise ConfigError(
                f"actions.remediation.mode: {self.mode!r} is not off, dry_run or enforce"
            )
        if self.via not in ("auto", "kubernetes", "slurm"):
            raise ConfigError(
                f"actions.remediation.via: {self.via!r} is not auto, kubernetes or slurm"
            )
        bad = sorted(set(self.conditions) - set(REMEDY_CONDITIONS))
        if bad:
            raise ConfigError(
                f"actions.remediation.conditions: {bad} unknown; use some of {REMEDY_CONDITIONS}"
            )


@dataclass(frozen=True)
class ActionSettings:
    default: PolicySettings = field(default_factory=PolicySettings)
    #: by namespace (Kubernetes) or partition/account (Slurm); ``owner:<Kind/ns/name>``
    #: and ``team:<team>`` keys name a workload's owner or team (collector/kube): owner,
    #: then namespace, then team, then ``default``
    policies: dict[str, PolicySettings] = field(default_factory=dict)
    exempt_namespaces: list[str] = field(default_factory=lambda: ["kube-system"])
    exempt_users: list[str] = field(default_factory=list)
    #: a pod label or annotation with this key set to "true" exempts it
    exempt_key: str = "gpufleet.io/exempt"
    #: never act when a GPU's newest sample is older than this
    max_data_age_seconds: float = 120.0
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    webhook: WebhookActionSettings = field(default_factory=WebhookActionSettings)
    remediation: RemediationSettings = field(default_factory=RemediationSettings)

    def __post_init__(self) -> None:
        r = self.remediation
        own = {"kubernetes": self.kubernetes.enabled, "slurm": self.slurm.enabled}
        if r.mode == "enforce" and not (own[r.via] if r.via in own else any(own.values())):
            which = f"actions.{r.via}" if r.via in own else "actions.kubernetes or actions.slurm"
            raise ConfigError(
                f"actions.remediation.mode: enforce needs an executor; set {which}.enabled: true"
            )

    def policy_for(self, namespace: str) -> PolicySettings:
        return self.policies.get(namespace, self.default)

    def policy_of(self, workload: WorkloadRef) -> PolicySettings:
        """The policy of ``workload``: its owner's, its namespace's, its team's, else
        ``default``; the most specific wins."""
        keys = [f"owner:{workload.owner}"] if workload.owner else []
        keys.append(workload.namespace)
        if workload.team:
            keys.append(f"team:{workload.team}")
        found = next((self.policies[k] for k in keys if k in self.policies), None)
        return found or self.default

    def any_enabled(self) -> bool:
        return any(p.mode != "off" for p in (self.default, *self.policies.values()))
