"""Which node names an agent token may post batches as.

An agent token is bound to node names or ``fnmatch`` globs (``gpu-node-a``,
``gpu-node-*``); the ingest thread checks each decoded batch's ``node`` against the binding
of the token that posted it before anything of the batch is stored, so a token of one node
can neither claim another node's GPUs nor take its ``seq`` numbers. The binding names the
token by its name, never its value. Its own module: the HTTP edge (collector/http) makes
it and the ingest queue (collector/ingest) checks it, and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

#: the glob of a token that may post as any node
ANY_NODE = "*"


@dataclass(frozen=True)
class NodeBinding:
    """``token_name`` may post batches for nodes matching any of ``globs`` (case-sensitive)."""

    token_name: str
    globs: tuple[str, ...]

    def allows(self, node: str) -> bool:
        return any(fnmatchcase(node, glob) for glob in self.globs)

    def refusal(self, node: str) -> str:
        """The 403 message for a batch of ``node`` this binding does not allow."""
        return (
            f"token {self.token_name!r} may post batches for nodes {', '.join(self.globs)}, "
            f"not for node {node!r}; give this agent a token bound to its node"
        )
