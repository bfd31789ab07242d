"""What the agent does with each reason a gpufleet collector gives for refusing a batch.

A collector refuses a batch with a JSON body ``{"error", "field", "reason"}``; ``reason``
names the rule (collector/backend.py's RejectReason). The agent drops a batch only when the
collector refuses it for good: the batch itself is at fault and no one can make the same
bytes acceptable. A refusal someone can fix (the node's clock, a version, a token, a limit)
holds the batch in the spool, retried with backoff, with an ERROR once per streak saying
why and what to do; the spool's own bounds (size, age) still end a hold that is never
fixed, logged and counted as any spool drop.

| reason                  | who can fix it                                   | the agent          |
|-------------------------|--------------------------------------------------|--------------------|
| unauthorized            | the operator: the token (token_file is re-read)  | hold               |
| future_timestamp        | the node's clock (chrony/NTP); time passing      | hold               |
| past_timestamp          | the node's clock; ingest.past_tolerance_seconds  | hold (ages out)    |
| schema_version          | upgrading the collector, or pinning the agent    | hold               |
| unsupported_media_type  | upgrading the collector (agent and collector     | hold               |
|                         | disagree on the encoding)                        |                    |
| duplicate_gpu           | the other node stops reporting the GPU uuid      | hold               |
| limit_exceeded          | the operator raises the limit; gone GPUs expire  | hold               |
| overloaded              | time: the collector sheds load                   | retry, Retry-After |
| too_large               | the agent: smaller batches                       | split in halves;   |
|                         |                                                  | 1 sample: drop     |
| malformed               | no one: the body will never parse                | drop               |
| invalid_value           | no one: the value is what the GPU reported       | drop               |
| unknown_gpu             | no one: the batch contradicts itself             | drop               |
| any other reason        | unknown (a collector newer than the agent)       | hold               |
| no gpufleet error body  | the operator: shipper.url, a proxy in between    | hold               |

An answer without a gpufleet body (a proxy's HTML 400/413/422, a 404 from a wrong path) is
no refusal of the batch: it never drops one. A 413 is answered by splitting whoever sent it
(a proxy's body limit is as real as the collector's); only the collector's 413 for a
one-sample batch drops it.
"""

from __future__ import annotations

#: refused for good: the batch is dropped, logged and counted
DEFINITIVE = frozenset({"malformed", "invalid_value", "unknown_gpu", "too_large"})

#: the held-batch label of an answer that did not come from a gpufleet collector
NOT_COLLECTOR = "not_collector"
#: the held-batch label of a collector reason this agent does not know
OTHER = "other"

#: refusals someone can fix: what to do, said once per streak
_ADVICE: dict[str, str] = {
    "unauthorized": "the collector refused the token: check shipper.token / token_file "
    "against the collector's server.tokens",
    "future_timestamp": "the node's clock is {ahead}the collector's: check chrony/NTP on "
    "this node (the batch is sent again once its samples are within the collector's "
    "ingest.future_tolerance_seconds)",
    "past_timestamp": "the batch's samples are older than the collector accepts "
    "(ingest.past_tolerance_seconds){behind}: check chrony/NTP on this node, or raise the "
    "tolerance to take the backlog; the spool's age bound drops it otherwise",
    "schema_version": "the collector does not speak this agent's schema: upgrade the "
    "collector or pin the agent to a version the collector speaks",
    "unsupported_media_type": "the collector does not take this agent's encoding: upgrade "
    "the collector or pin the agent to a version the collector takes",
    "duplicate_gpu": "another node still reports one of this node's GPU uuids: check for a "
    "cloned node name or a GPU moved between nodes (the claim expires on the collector)",
    "limit_exceeded": "a collector limit (GPUs, workloads or label values per node or "
    "fleet) is reached: raise it in the collector's settings, or wait for gone GPUs to "
    "expire",
    NOT_COLLECTOR: "the answer did not come from a gpufleet collector (no gpufleet error "
    "body): check shipper.url and any proxy in between",
}

#: every label value of gpufleet_agent_batches_held_total (bounded: a collector's reason
#: text never becomes a label value as it is)
HELD_LABELS = frozenset({*_ADVICE, OTHER})


def held_label(reason: str) -> str:
    """The bounded metric label of a hold for ``reason``."""
    return reason if reason in HELD_LABELS else OTHER


def advice(reason: str, clock_ahead_seconds: float | None) -> str:
    """What the operator should do about a refusal for ``reason``, one sentence.

    ``clock_ahead_seconds`` is how far the node's clock is ahead of the collector's (its
    ``Date`` header; negative: behind), None when the answer had no date.
    """
    text = _ADVICE.get(reason)
    if text is None:
        return (
            f"the collector refused the batch for a reason this agent does not know "
            f"({reason[:60]!r}): upgrade the agent; the batch is kept"
        )
    ahead = behind = ""
    if clock_ahead_seconds is not None:
        ahead = f"{clock_ahead_seconds:.0f} s ahead of " if clock_ahead_seconds > 1 else ""
        if clock_ahead_seconds < -1:
            behind = f"; the node's clock is {-clock_ahead_seconds:.0f} s behind the collector's"
    return text.format(ahead=ahead or "ahead of ", behind=behind)
