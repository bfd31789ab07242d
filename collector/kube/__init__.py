"""Kubernetes metadata, read once by the collector: one list+watch of pods, namespaces and
the owners above them (ReplicaSets, Jobs), turned into each pod workload's owner, team, user,
queue and priority class."""
