"""How ``gpufleet demo`` runs simulated time live: in steps, no faster than its agents deliver.

Simulated time runs ``--speed`` times faster than wall time, so any wall-time delay
between an agent's read and the collector's buffer (a CPU shared with other work, 125
agents in one interpreter, a long GC pause) ages every sample ``--speed`` times as fast:
at 1,000 GPUs and ``--speed 60`` a 1.5 s hiccup made the whole fleet "unknown", and the
figures flapped with every hiccup. A real fleet has no such clock: its time does not
run ahead of its agents. So the pacer steps simulated time one sampling step at a time
(every agent reads at each step, as in the pre-run), and takes the next step only when
each agent's samples older than ``lead_seconds`` have been acknowledged by the collector.
When the machine keeps up, time runs at ``--speed``; when it cannot, simulated time slows
down (``speed_now`` says how much) and every figure stays true.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from agent.model import GpuSample
from agent.stats import AgentStats

log = logging.getLogger("gpufleet.demo")

#: wall seconds to wait for an agent's samples before going on without it (an agent
#: whose batches the collector refuses must not stop the demo); it rejoins once caught up
PATIENCE_SECONDS = 10.0
#: how often (wall seconds) a step waiting for deliveries looks again
POLL_SECONDS = 0.01
#: wall seconds over which ``speed_now`` is measured
SPEED_WINDOW_SECONDS = 10.0


class SimClock:
    """Simulated Unix time, set by hand: by the pre-run, tests, and the pacer live."""

    def __init__(self, start: float) -> None:
        self._lock = threading.Lock()
        self._now = start

    def set(self, value: float) -> None:
        with self._lock:
            self._now = value

    def __call__(self) -> float:
        with self._lock:
            return self._now


class Reader(Protocol):
    def tick(self) -> list[GpuSample]: ...


class PacedAgent(Protocol):
    """What the pacer needs of a demo agent (``DemoAgent``)."""

    @property
    def node(self) -> str: ...
    @property
    def sampler(self) -> Reader: ...
    @property
    def stats(self) -> AgentStats: ...
    def offline(self) -> bool:
        """Whether the agent cannot reach the collector now (a simulated outage): it is
        not waited for meanwhile; its spool holds what it takes."""
        ...


class Backlog:
    """One agent's samples taken but not yet acknowledged, by simulated time taken.

    Counted from the agent's own figures: samples acknowledged by the collector (or dropped
    from the spool, which will never be) against samples taken at each step."""

    def __init__(self, agent: PacedAgent) -> None:
        self.agent = agent
        self._taken = 0
        #: (simulated time of a step, samples taken up to and including it)
        self._steps: collections.deque[tuple[float, int]] = collections.deque()

    def start(self) -> None:
        """Count from what is settled now (the pre-run's samples, flushed and acked)."""
        self._taken = self._settled()
        self._steps.clear()

    def took(self, sim_time: float, samples: int) -> None:
        self._taken += samples
        self._steps.append((sim_time, self._taken))

    def oldest_unacked(self) -> float | None:
        """The simulated time of the oldest step with samples not acknowledged yet."""
        settled = self._settled()
        steps = self._steps
        while steps and steps[0][1] <= settled:
            steps.popleft()
        return steps[0][0] if steps else None

    def _settled(self) -> int:
        stats = self.agent.stats.snapshot()
        return stats.samples_sent_total + stats.spool_dropped_samples_total


class Pacer:
    """Steps ``clock`` by ``step_seconds`` every ``step_seconds / speed`` wall seconds at
    most, each agent reading once per step, while every agent is within ``lead_seconds``
    of simulated time (see the module docstring). ``run`` is the pacing thread's loop."""

    def __init__(
        self,
        clock: SimClock,
        agents: Sequence[PacedAgent],
        step_seconds: float,
        speed: float,
        lead_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.step_seconds = step_seconds
        self.speed = speed
        self.lead_seconds = lead_seconds
        self._backlogs = [Backlog(agent) for agent in agents]
        self._monotonic = monotonic
        self._excused: set[int] = set()
        self._lock = threading.Lock()
        #: (wall, simulated) time of recent steps, for ``speed_now``
        self._recent: collections.deque[tuple[float, float]] = collections.deque()

    def run(self, stop: threading.Event) -> None:
        """Step until ``stop`` is set; time lost waiting is not caught up later."""
        wall_step = self.step_seconds / self.speed
        for backlog in self._backlogs:
            backlog.start()
        # the first step a wall step from now: the clock stands at the pre-run's end, the
        # wall time's now, and a step at once would read the fleet a step ahead of its time
        next_at = self._monotonic() + wall_step
        t = self.clock()
        while not stop.is_set():
            t += self.step_seconds
            self._wait_for_agents(t, stop)
            delay = next_at - self._monotonic()
            if delay > 0 and stop.wait(delay):
                return
            next_at = max(next_at, self._monotonic()) + wall_step
            self.step(t)

    def step(self, sim_time: float) -> None:
        """Set simulated time to ``sim_time`` and have every agent read once."""
        self.clock.set(sim_time)
        for backlog in self._backlogs:
            try:
                samples = backlog.agent.sampler.tick()
            except Exception:  # one bad read must not stop the fleet (as Sampler.run)
                log.exception("demo: node %s: sampling failed", backlog.agent.node)
                continue
            backlog.took(sim_time, len(samples))
        with self._lock:
            self._recent.append((self._monotonic(), sim_time))
            while self._recent[0][0] < self._recent[-1][0] - SPEED_WINDOW_SECONDS:
                self._recent.popleft()

    def speed_now(self) -> float | None:
        """Simulated seconds per wall second over the last ``SPEED_WINDOW_SECONDS``."""
        with self._lock:
            if len(self._recent) < 2:
                return None
            (w0, s0), (w1, s1) = self._recent[0], self._recent[-1]
        return (s1 - s0) / (w1 - w0) if w1 > w0 else None

    def _wait_for_agents(self, sim_time: float, stop: threading.Event) -> None:
        """Until every agent's samples taken before ``sim_time - lead_seconds`` are
        acknowledged; an agent still behind after ``PATIENCE_SECONDS`` is excused. Only
        the agents found behind are looked at again (an agent caught up stays so)."""
        due = sim_time - self.lead_seconds
        started = self._monotonic()
        behind = self._behind(due, range(len(self._backlogs)))
        while behind and not stop.is_set():
            if self._monotonic() - started >= PATIENCE_SECONDS:
                self._excuse(behind, sim_time)
                return
            stop.wait(POLL_SECONDS)
            behind = self._behind(due, behind)

    def _behind(self, due: float, candidates: Iterable[int]) -> list[int]:
        behind = []
        for i in candidates:
            backlog = self._backlogs[i]
            if backlog.agent.offline():
                continue
            oldest = backlog.oldest_unacked()
            late = oldest is not None and oldest <= due
            if not late and i in self._excused:
                self._excused.discard(i)
                log.info("demo: node %s has caught up", backlog.agent.node)
            elif late and i not in self._excused:
                behind.append(i)
        return behind

    def _excuse(self, behind: list[int], sim_time: float) -> None:
        for i in behind:
            backlog = self._backlogs[i]
            oldest = backlog.oldest_unacked() or sim_time
            log.warning(
                "demo: node %s: samples %.0f simulated s old are still not acknowledged "
                "after %.0f s; simulated time goes on without it (its GPUs will show "
                "unknown until it catches up; see the agent's log for why its batches fail)",
                backlog.agent.node,
                sim_time - oldest,
                PATIENCE_SECONDS,
            )
        self._excused.update(behind)
