"""The command that frees each workload's GPUs, as its executor finds it, for every message
that recommends a release (the opening one, updates, reminders), not only the warnings.

``notify.commands.release_command`` decides the command; what it needs is only in the
executors' hands: a pod's controller (Deployment or StatefulSet, through its ReplicaSet) is
in the Kubernetes API, Slurm's ``--signal`` in the executor's settings. So a pod owned by a
Deployment reads ``kubectl scale deployment ... --replicas=0`` from the first message on,
never ``kubectl delete pod`` (its controller would only start another pod on the GPU).

Answers are kept per workload key, for the workloads asked about in the last pass only (a
pod's owner does not change while the pod lives): one inspection per new recommendation,
not one per pass. Where there is no executor, or it cannot say, the command is
``release_command`` of the key alone; a failed inspection is not kept, so it is asked again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from collector.actions.engine import Executors
from collector.actions.executors import ExecutorError, Target
from collector.notify.commands import release_command
from collector.records import WorkloadRef

log = logging.getLogger(__name__)


class CommandBook:
    """Workload key -> the command that frees its GPUs, asked of its executor once."""

    def __init__(self, executors: Executors) -> None:
        self.executors = executors
        self._known: dict[str, str] = {}

    def commands(self, refs: Iterable[WorkloadRef]) -> dict[str, str]:
        """Each of ``refs``' commands ("" where there is none to type); what is kept for
        workloads not in ``refs`` is forgotten (so the book is bounded by what is asked)."""
        known: dict[str, str] = {}
        out: dict[str, str] = {}
        for ref in refs:
            command = self._known.get(ref.key)
            if command is None:
                command, sure = self._inspect(ref)
                if sure:
                    known[ref.key] = command
            else:
                known[ref.key] = command
            out[ref.key] = command
        self._known = known
        return out

    def _inspect(self, ref: WorkloadRef) -> tuple[str, bool]:
        """(the command, whether the executor said it); without one, the key's own."""
        target = Target.of(ref)
        executor = self.executors.for_target(target)
        if executor is None:
            return release_command(ref.key), True
        try:
            seen = executor.inspect(target)
        except ExecutorError as err:
            log.info("release command of %s: cannot inspect (%s); asked again", ref.key, err)
            return release_command(ref.key), False
        if not seen.exists:  # gone: its recommendation resolves; nothing better to say
            return release_command(ref.key), True
        return seen.command or release_command(ref.key), True
