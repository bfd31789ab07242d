"""Halving a batch that was too large for the collector or a proxy (HTTP 413), crash-safely.

A half's identity is derived from the batch it comes from rather than drawn from the
shipper's counter: same ``agent_boot_id``, and a seq with bit 62 set that encodes the
original batch's seq (``root``), the half's first sample within it (``start``) and how many
halvings deep it is (``depth``). Splitting the same batch again always gives the same two
halves, so a crash anywhere in a split cannot count a sample twice: a half the collector
already took is acknowledged as a duplicate, and the spool's recovery
(``interrupted_splits``) removes a batch whose halves are both on disk, or a lone half of
a split that did not finish. Split seqs never meet the counter's (bit 62 is never set in
those) and sort, within one original, in sample order.

Each half keeps the original's ``sent_at``: it was built then, and the collector reads the
node's clock from it.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from agent.model import Batch

SPLIT_FLAG = 1 << 62
_DEPTH_BITS = 5
_START_BITS = 21
_ROOT_BITS = 62 - _START_BITS - _DEPTH_BITS
#: the most samples a batch may hold to be split down to single samples (2**21)
MAX_SPLIT_SAMPLES = 1 << _START_BITS


def _parts(seq: int) -> tuple[int, int, int]:
    """(root, start, depth) of a seq; a counter seq is its own root at depth 0."""
    if not seq & SPLIT_FLAG:
        return seq, 0, 0
    depth = seq & ((1 << _DEPTH_BITS) - 1)
    start = (seq >> _DEPTH_BITS) & ((1 << _START_BITS) - 1)
    root = (seq >> (_DEPTH_BITS + _START_BITS)) & ((1 << _ROOT_BITS) - 1)
    return root, start, depth


def _seq(root: int, start: int, depth: int) -> int:
    return SPLIT_FLAG | root << (_START_BITS + _DEPTH_BITS) | start << _DEPTH_BITS | depth


def half_seqs(seq: int, samples: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """``((seq, samples), (seq, samples))`` of the two halves of batch ``seq``; None when
    it cannot be split: one sample, or past what the seq encoding holds."""
    root, start, depth = _parts(seq)
    first = samples // 2
    fits = (
        root < 1 << _ROOT_BITS
        and start + samples <= MAX_SPLIT_SAMPLES
        and depth + 1 < 1 << _DEPTH_BITS
    )
    if samples < 2 or not fits:
        return None
    return (
        (_seq(root, start, depth + 1), first),
        (_seq(root, start + first, depth + 1), samples - first),
    )


def halves(batch: Batch) -> tuple[Batch, Batch] | None:
    """``batch`` as two batches of half its samples each, with the halves' identities;
    None when it cannot be split (see ``half_seqs``)."""
    seqs = half_seqs(batch.seq, len(batch.samples))
    if seqs is None:
        return None
    (first_seq, cut), (second_seq, _) = seqs
    first = msgspec.structs.replace(batch, seq=first_seq, samples=batch.samples[:cut])
    # the host readings stay with the first half: sent once, never twice
    second = msgspec.structs.replace(batch, seq=second_seq, samples=batch.samples[cut:], hosts=())
    return first, second


#: a spooled batch as its file name tells it: (created ns, boot id, seq, samples)
Identity = tuple[int, str, int, int]


def interrupted_splits(batches: Sequence[Identity]) -> set[Identity]:
    """What to remove of a spool a crash left in the middle of a split: a batch whose two
    halves are both there (the split had finished but for removing it), or a lone half
    beside the batch it comes from (the split had not finished; it is done again)."""
    present = set(batches)
    remove: set[Identity] = set()
    for created, boot, seq, samples in batches:
        seqs = half_seqs(seq, samples)
        if seqs is None:
            continue
        found = [(created, boot, s, n) for s, n in seqs if (created, boot, s, n) in present]
        if len(found) == 2:
            remove.add((created, boot, seq, samples))
        else:
            remove.update(found)
    return remove
