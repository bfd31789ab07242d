"""Collector replicas on one PostgreSQL: shard leases, one leader, the outbox claim.

The coordination is rows in PostgreSQL decided by the server's clock (DESIGN section 7):
no protocol of our own between replicas, no replica clock in any decision.
"""
