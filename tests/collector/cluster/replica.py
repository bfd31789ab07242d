"""One replica as a process of its own: ``python -m tests.collector.cluster.replica URL NAME
[--claim]``. It keeps its leases (rig.FAST timing) until killed; with ``--claim`` it also,
once leader, claims every due outbox row and prints ``claimed <n>``, then never sends:
a claimer killed in the middle of its work."""

from __future__ import annotations

import sys
import time

from collector.cluster.outbox_claims import Holder, claim_due
from tests.collector.cluster.rig import FAST, keeper


def main(url: str, name: str, claim: bool) -> None:
    k = keeper(url, name)
    k.start()
    print("started", flush=True)
    while claim:
        epoch = k.state.leader_epoch
        if epoch is not None:
            conn = k.connect()
            holder = Holder(f"{name}/0", "leader", name, epoch)
            claimed = claim_due(conn, holder, time.time(), FAST.lease_seconds, limit=1000)
            print(f"claimed {len(claimed)}", flush=True)
            break
        time.sleep(0.05)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--claim" in sys.argv[3:])
