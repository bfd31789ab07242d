"""The collector's metric catalogue: every family collector/metrics/exporter.py can emit.

Rows are ``gpufleet.metric_spec.MetricSpec``, as in the agent's catalogue: exposed name,
Prometheus type, unit, label names in order, help. Names follow the Prometheus naming guide
(base unit suffix, counters end in ``_total``); workload labels use OpenTelemetry's names
(``k8s_namespace_name``) so they never clash with target labels.

``workload`` is the workload key (``pod:ml/notebook-7``, ``slurm:123``); "" means nobody
held the GPU (unallocated). ``model`` is the canonical price-book model (``H100``), not
the NVML name. Money is in the price book's currency, named by the ``currency`` label.
"""

from __future__ import annotations

from gpufleet.metric_spec import MetricSpec

GPU_LABELS: tuple[str, ...] = ("node", "gpu", "uuid", "model", "k8s_namespace_name", "workload")
WORKLOAD_LABELS: tuple[str, ...] = ("k8s_namespace_name", "workload", "team")

FLEET_GPUS = MetricSpec(
    "gpufleet_fleet_gpus",
    "gauge",
    "",
    ("state", "model"),
    "GPUs and MIG instances by state now (active, allocated_idle, unallocated, unknown).",
)
FLEET_UTILISATION = MetricSpec(
    "gpufleet_fleet_utilisation_ratio",
    "gauge",
    "ratio",
    (),
    "Mean SM activity (0..1) over GPUs with fresh data; absent when none has any.",
)
FLEET_IDLE_COST = MetricSpec(
    "gpufleet_fleet_idle_cost_per_hour",
    "gauge",
    "",
    ("currency",),
    "Waste now: the summed hourly price of every GPU idle now (allocated-idle or "
    "unallocated), in the currency label's unit per hour.",
)
FLEET_POWER = MetricSpec(
    "gpufleet_fleet_power_watts",
    "gauge",
    "watts",
    (),
    "Power draw summed over physical GPUs with fresh data.",
)
GPU_STATE = MetricSpec(
    "gpufleet_gpu_state",
    "gauge",
    "",
    (*GPU_LABELS, "state"),
    "1 for the GPU's current state; one series per GPU or MIG instance.",
)
GPU_IDLE = MetricSpec(
    "gpufleet_gpu_idle_seconds",
    "gauge",
    "seconds",
    GPU_LABELS,
    "How long the GPU has been idle now (0 when not idle); workload is who holds it.",
)
WORKLOAD_IDLE = MetricSpec(
    "gpufleet_workload_idle_gpu_seconds_total",
    "counter",
    "seconds",
    (*WORKLOAD_LABELS, "model"),
    "Idle GPU-seconds by workload and GPU model since the ledger began.",
)
WORKLOAD_WASTE = MetricSpec(
    "gpufleet_workload_waste_total",
    "counter",
    "",
    (*WORKLOAD_LABELS, "model", "currency"),
    "Cost of idle GPU time (idle GPU-seconds x hourly price), in the currency label's unit.",
)
WORKLOAD_ENERGY = MetricSpec(
    "gpufleet_workload_energy_joules_total",
    "counter",
    "joules",
    WORKLOAD_LABELS,
    "GPU energy attributed to the workload since the ledger began.",
)
WORKLOAD_ESTIMATED_ENERGY = MetricSpec(
    "gpufleet_workload_estimated_energy_joules_total",
    "counter",
    "joules",
    WORKLOAD_LABELS,
    "The part of the workload's energy integrated from power samples (GPUs without an "
    "NVML energy counter) since the ledger began.",
)
WORKLOAD_CARBON = MetricSpec(
    "gpufleet_workload_carbon_grams_total",
    "counter",
    "grams",
    WORKLOAD_LABELS,
    "Grams CO2e of that energy (kWh x PUE x grid intensity of the node's region).",
)
#: the attributes gpufleet_workload_info may carry, those kubernetes.metric_labels allows
WORKLOAD_INFO_LABELS: tuple[str, ...] = (
    "team", "user", "owner_kind", "owner_name", "queue", "priority_class",
)  # fmt: skip
WORKLOAD_INFO = MetricSpec(
    "gpufleet_workload_info",
    "gauge",
    "",
    ("k8s_namespace_name", "workload", *WORKLOAD_INFO_LABELS),
    "1 for each workload with per-workload series, labelled with who it belongs to (its "
    "owner, the top of its owner chain, and team, collector/kube); join on workload. "
    "Attributes not in kubernetes.metric_labels are empty.",
)
CARBON_PUE = MetricSpec(
    "gpufleet_carbon_pue_ratio",
    "gauge",
    "ratio",
    (),
    "Power usage effectiveness the carbon figures use (facility energy / IT energy).",
)
CARBON_INTENSITY = MetricSpec(
    "gpufleet_carbon_intensity_grams_per_kilowatt_hour",
    "gauge",
    "grams_per_kilowatt_hour",
    ("region",),
    "Grid carbon intensity in use now (gCO2e/kWh, before PUE), per region of the known nodes.",
)
RECOMMENDATIONS_OPEN = MetricSpec(
    "gpufleet_recommendations_open",
    "gauge",
    "",
    ("kind",),
    "Recommendations open or notified, by kind.",
)
RECOMMENDATION_SAVINGS = MetricSpec(
    "gpufleet_recommendation_savings_per_month",
    "gauge",
    "",
    ("kind", "currency"),
    "Monthly saving of the open recommendations if each situation lasts the month (the top "
    "of the range), summed by kind.",
)
RECOMMENDATION_SAVINGS_LOW = MetricSpec(
    "gpufleet_recommendation_savings_low_per_month",
    "gauge",
    "",
    ("kind", "currency"),
    "Saving over the next month of the open recommendations if each situation lasts only as "
    "long again as it has been observed (the low end of the range), summed by kind.",
)
# why the GPUs waste (issue 24): from the open bottleneck and broken_gpus recommendations
# (collector/metrics/verdicts.py), so the figures are /v1/recommendations'
WORKLOAD_BOTTLENECK_COST = MetricSpec(
    "gpufleet_workload_bottleneck_unused_cost_per_hour",
    "gauge",
    "",
    ("k8s_namespace_name", "workload", "cause", "currency"),
    "The part of a workload's unused GPU share (price x (1 - used share)) its open "
    "bottleneck recommendation puts on each likely cause (input_bound, host_cpu_bound, "
    "communication_bound, memory_bandwidth_bound, throttled, no_tensor_cores, straggler, "
    "gpu_fault), in the currency label's unit per hour.",
)
GPU_FAULT_COST = MetricSpec(
    "gpufleet_gpu_fault_cost_per_hour",
    "gauge",
    "",
    ("node", "workload", "condition", "currency"),
    "Money spent on GPUs a workload holds while broken (condition: off_bus, xid, ecc, "
    "throttled), per node and workload, from the open broken_gpus recommendations, in the "
    "currency label's unit per hour.",
)
NODE_GPUS_MISSING = MetricSpec(
    "gpufleet_node_gpus_missing",
    "gauge",
    "",
    ("node",),
    "GPUs a node lacks: expected (the most it reported, or analysis.expected_gpus_per_node "
    "or its expected_gpus label) minus those reporting fresh, healthy samples; only nodes "
    "that are short and still report.",
)
NODE_CRIPPLED_COST = MetricSpec(
    "gpufleet_node_crippled_capacity_cost_per_hour",
    "gauge",
    "",
    ("node", "currency"),
    "The hourly price of the working GPUs of a node that is short of GPUs: capacity paid "
    "for that a job sized for the whole node can no longer use.",
)
VERDICTS: tuple[MetricSpec, ...] = (
    WORKLOAD_BOTTLENECK_COST,
    GPU_FAULT_COST,
    NODE_GPUS_MISSING,
    NODE_CRIPPLED_COST,
)
BATCHES = MetricSpec(
    "gpufleet_collector_batches_total",
    "counter",
    "",
    ("result",),
    "Batches received, by result: accepted, duplicate (acknowledged, ignored), rejected.",
)
REJECTED_BATCHES = MetricSpec(
    "gpufleet_collector_rejected_batches_total",
    "counter",
    "",
    ("reason",),
    "Batches refused, by reason (too_large, malformed, invalid_value, unknown_gpu, ...).",
)
SAMPLES = MetricSpec(
    "gpufleet_collector_samples_total",
    "counter",
    "",
    (),
    "GPU samples accepted.",
)
REJECTED_SAMPLES = MetricSpec(
    "gpufleet_collector_rejected_samples_total",
    "counter",
    "",
    ("reason",),
    "GPU samples in refused batches, by reason.",
)
LATE_SAMPLES = MetricSpec(
    "gpufleet_collector_late_samples_total",
    "counter",
    "",
    ("reason",),
    "Samples of accepted batches not accounted, by reason: behind_applied (behind event "
    "time already applied: a node clock that stepped, or a batch held too long), "
    "duplicate_timestamp.",
)
IMPLAUSIBLE_SAMPLES = MetricSpec(
    "gpufleet_collector_implausible_samples_total",
    "counter",
    "",
    ("field",),
    "Accepted values not taken as measured because no GPU can produce them, by field "
    "(energy_joules: a counter delta above what the GPU can draw; estimated from power).",
)
INGEST_SECONDS = MetricSpec(
    "gpufleet_collector_ingest_seconds_total",
    "counter",
    "seconds",
    (),
    "Wall seconds spent making batches durable and applying them.",
)
INTAKE_CORRUPT_RECORDS = MetricSpec(
    "gpufleet_collector_intake_corrupt_records_total",
    "counter",
    "",
    (),
    "Damaged intake log records skipped when the collector started, their batches lost (at "
    "least one per damaged run); the log names each segment and byte offset.",
)
LAST_INGEST = MetricSpec(
    "gpufleet_collector_last_ingest_timestamp_seconds",
    "gauge",
    "seconds",
    (),
    "Unix time the last batch was accepted; absent before the first.",
)
PENDING_SAMPLES = MetricSpec(
    "gpufleet_collector_pending_samples",
    "gauge",
    "",
    (),
    "Samples durable but not yet applied (held for the reorder window).",
)
LAG = MetricSpec(
    "gpufleet_collector_lag_seconds",
    "gauge",
    "seconds",
    (),
    "How far applied event time trails the newest received sample.",
)
NODE_CLOCK_OFFSET = MetricSpec(
    "gpufleet_node_clock_offset_seconds",
    "gauge",
    "seconds",
    ("node",),
    "How far the node's clock is ahead of the collector's (negative: behind), measured "
    "from its batches' sent_at; staleness and windows are corrected by it.",
)
LEDGER_UP = MetricSpec(
    "gpufleet_collector_ledger_up",
    "gauge",
    "",
    (),
    "1 when the ledger answers and its writes work (commits and intake-log appends), "
    "else 0 (GET /healthz and /readyz answer 503).",
)
# -- the write path (collector/ledger/write_health.py) ------------------------------------
READY = MetricSpec(
    "gpufleet_collector_ready",
    "gauge",
    "",
    (),
    "1 when the collector is ready (GET /readyz answers 200): the write path works.",
)
LAST_COMMIT = MetricSpec(
    "gpufleet_collector_last_commit_timestamp_seconds",
    "gauge",
    "seconds",
    (),
    "Unix time of the last successful ledger commit; absent before the first.",
)
COMMIT_FAILURES = MetricSpec(
    "gpufleet_collector_commit_failures_total",
    "counter",
    "",
    ("reason",),
    "Ledger commits that failed (retried every apply interval), by reason: disk_full, "
    "read_only, overflow (a value the ledger cannot hold), other.",
)
INTAKE_FAILURES = MetricSpec(
    "gpufleet_collector_intake_write_failures_total",
    "counter",
    "",
    ("reason",),
    "Intake-log appends that failed (their batches answered 503), by reason.",
)
INTAKE_BACKLOG_BATCHES = MetricSpec(
    "gpufleet_collector_intake_pending_batches",
    "gauge",
    "",
    (),
    "Acknowledged batches in the intake log not yet applied and committed.",
)
INTAKE_BACKLOG_BYTES = MetricSpec(
    "gpufleet_collector_intake_pending_bytes",
    "gauge",
    "bytes",
    (),
    "Bytes (as stored) of the acknowledged batches not yet applied and committed.",
)
INTAKE_OLDEST_AGE = MetricSpec(
    "gpufleet_collector_intake_oldest_pending_age_seconds",
    "gauge",
    "seconds",
    (),
    "How long ago the oldest batch not yet applied arrived; 0 when none waits.",
)
QUARANTINED = MetricSpec(
    "gpufleet_collector_quarantined_batches",
    "gauge",
    "",
    (),
    "Batches set aside because they cannot be applied, in <ledger>-intake/quarantine/ "
    "(counted at the start and as they come: files deleted count until the next start).",
)
WRITE_PATH: tuple[MetricSpec, ...] = (
    READY, LAST_COMMIT, COMMIT_FAILURES, INTAKE_FAILURES, INTAKE_BACKLOG_BATCHES,
    INTAKE_BACKLOG_BYTES, INTAKE_OLDEST_AGE, QUARANTINED,
)  # fmt: skip
EXPORT_ERRORS = MetricSpec(
    "gpufleet_collector_export_errors_total",
    "counter",
    "",
    ("part",),
    "Scrapes that left a part out because the backend failed (fleet, totals, ...).",
)

#: families built from the price book and carbon settings in force now (RatesExporter)
NOTIFY_MESSAGES = MetricSpec(
    "gpufleet_notify_messages_total",
    "counter",
    "",
    ("channel", "kind", "outcome"),
    "Chat/webhook send attempts by outcome (ok, retry, rate_limited, permanent).",
)
NOTIFY_CHANNEL_BROKEN = MetricSpec(
    "gpufleet_notify_channel_broken",
    "gauge",
    "",
    ("channel", "kind"),
    "1 when the channel's service refused it permanently (bad URL, token, signature).",
)
NOTIFY_OUTBOX_PENDING = MetricSpec(
    "gpufleet_notify_outbox_pending",
    "gauge",
    "",
    ("channel",),
    "Notifications stored in the ledger's outbox and not yet delivered.",
)
NOTIFY: tuple[MetricSpec, ...] = (NOTIFY_MESSAGES, NOTIFY_CHANNEL_BROKEN, NOTIFY_OUTBOX_PENDING)

INFLUX_ENQUEUED = MetricSpec(
    "gpufleet_influx_points_enqueued_total",
    "counter",
    "",
    (),
    "Points queued for InfluxDB since the collector started.",
)
INFLUX_WRITTEN = MetricSpec(
    "gpufleet_influx_points_written_total",
    "counter",
    "",
    (),
    "Points InfluxDB accepted since the collector started.",
)
INFLUX_DROPPED = MetricSpec(
    "gpufleet_influx_points_dropped_total",
    "counter",
    "",
    ("reason",),
    "Points given up: overflow (queue full), rejected (by the server), shutdown, unreadable.",
)
INFLUX_WRITE_FAILURES = MetricSpec(
    "gpufleet_influx_write_failures_total",
    "counter",
    "",
    (),
    "Write requests to InfluxDB that failed (retried with backoff).",
)
INFLUX_QUEUE = MetricSpec(
    "gpufleet_influx_queue_points",
    "gauge",
    "",
    (),
    "Points waiting for InfluxDB, including those in flight.",
)
INFLUX: tuple[MetricSpec, ...] = (
    INFLUX_ENQUEUED, INFLUX_WRITTEN, INFLUX_DROPPED, INFLUX_WRITE_FAILURES, INFLUX_QUEUE,
)  # fmt: skip

#: the Kubernetes metadata reader (collector/kube), when kubernetes.enabled
KUBE_OBJECTS = MetricSpec(
    "gpufleet_kube_objects",
    "gauge",
    "",
    ("resource",),
    "Objects the Kubernetes metadata reader holds, by resource (pods, namespaces, ...).",
)
KUBE_DROPPED = MetricSpec(
    "gpufleet_kube_dropped_objects_total",
    "counter",
    "",
    ("resource",),
    "Objects not kept because kubernetes.max_pods or max_owners was reached: raise it.",
)
KUBE_LISTS = MetricSpec(
    "gpufleet_kube_lists_total",
    "counter",
    "",
    ("resource",),
    "Full lists of a resource: one at start, one after each expired watch (410 Gone) or failure.",
)
KUBE_GONE = MetricSpec(
    "gpufleet_kube_watch_expired_total",
    "counter",
    "",
    ("resource",),
    "Watches the API server ended with 410 Gone (too old a resourceVersion): each relisted.",
)
KUBE_FAILURES = MetricSpec(
    "gpufleet_kube_failures_total",
    "counter",
    "",
    ("resource",),
    "Lists or watches that failed (unreachable, 401, 403: see the log); retried with backoff.",
)
KUBE: tuple[MetricSpec, ...] = (KUBE_OBJECTS, KUBE_DROPPED, KUBE_LISTS, KUBE_GONE, KUBE_FAILURES)

RATES: tuple[MetricSpec, ...] = (FLEET_IDLE_COST, CARBON_PUE, CARBON_INTENSITY)

# failed authentication at the HTTP edge (collector/http/auth.py); no token, no address
AUTH_FAILURES = MetricSpec(
    "gpufleet_collector_auth_failures_total",
    "counter",
    "",
    ("reason",),
    "Requests refused by authentication, by reason: missing (no bearer token), invalid "
    "(no such token), scope (a token without the route's scope), rate_limited (429: too "
    "many failures from one address).",
)
AUTH: tuple[MetricSpec, ...] = (AUTH_FAILURES,)
# admission control at the HTTP edge (collector/http/admission.py); shed batches count
# in REJECTED_BATCHES{reason="overloaded"}
INFLIGHT_BYTES = MetricSpec(
    "gpufleet_collector_inflight_bytes",
    "gauge",
    "bytes",
    (),
    "Bytes of batch bodies being read or queued and not yet stored; past "
    "server.max_inflight_bytes batches are answered 429 with Retry-After.",
)
QUEUED_BATCHES = MetricSpec(
    "gpufleet_collector_queued_batches",
    "gauge",
    "",
    (),
    "Batches queued for the ingest thread and not yet stored; past "
    "server.max_queued_batches batches are answered 429 with Retry-After.",
)
LOOP_LAG = MetricSpec(
    "gpufleet_collector_event_loop_lag_seconds",
    "gauge",
    "seconds",
    (),
    "The most the HTTP event loop ran behind its schedule in the last 2 s; past "
    "server.max_loop_lag_seconds batches are answered 429 with Retry-After.",
)
ADMISSION: tuple[MetricSpec, ...] = (INFLIGHT_BYTES, QUEUED_BATCHES, LOOP_LAG)

# what-if costs of plans over the pricing look-back (collector/metrics/plans.py)
PLAN_COST = MetricSpec(
    "gpufleet_plan_cost_per_month",
    "gauge",
    "",
    ("currency", "pool", "scenario"),
    "Cost per month of a pool's GPUs (a model and the price entry its nodes pay) over the "
    "pricing look-back, by scenario: today (the mix bought now), recommended (the cheapest "
    "reserved baseline plus on demand), all_on_demand, all_reserved.",
)
PLAN_RESERVED_GPUS = MetricSpec(
    "gpufleet_plan_reserved_gpus",
    "gauge",
    "",
    ("pool", "plan", "scenario"),
    "GPUs of a pool on a commitment plan: today (bought now) and recommended.",
)
UTILISATION_TARGET = MetricSpec(
    "gpufleet_fleet_utilisation_target_ratio",
    "gauge",
    "ratio",
    (),
    "The fleet utilisation target (analysis.utilisation_target, 0..1).",
)
PLANS: tuple[MetricSpec, ...] = (PLAN_COST, PLAN_RESERVED_GPUS, UTILISATION_TARGET)

# what the releases of the last 7 days freed (collector/metrics/savings.py)
SAVINGS_FREED = MetricSpec(
    "gpufleet_savings_freed_gpu_seconds",
    "gauge",
    "seconds",
    (),
    "GPU-seconds the releases of the last 7 days freed: from each release to now, the time "
    "its GPUs were not held idle by anyone (collector/analysis/savings.py).",
)
SAVINGS_MONEY = MetricSpec(
    "gpufleet_savings_money",
    "gauge",
    "",
    ("currency",),
    "Money the releases of the last 7 days did not spend: the freed GPU-hours at the "
    "release recommendations' prices.",
)
SAVINGS_ENERGY = MetricSpec(
    "gpufleet_savings_energy_joules",
    "gauge",
    "joules",
    (),
    "Idle energy the releases of the last 7 days did not spend (the freed GPU-hours at "
    "the recommendations' idle power).",
)
SAVINGS_RELEASES = MetricSpec(
    "gpufleet_savings_releases",
    "gauge",
    "",
    ("by",),
    "Releases in the last 7 days: by auto-release (auto) or from chat (chat).",
)
SAVINGS: tuple[MetricSpec, ...] = (SAVINGS_FREED, SAVINGS_MONEY, SAVINGS_ENERGY, SAVINGS_RELEASES)

# a collector replica's own leases (collector/metrics/replica_scope.py); every replica
REPLICA_SHARDS = MetricSpec(
    "gpufleet_replica_shards_owned",
    "gauge",
    "",
    (),
    "Shards this replica owns (applies) as of its last lease renewal.",
)
REPLICA_LEADER = MetricSpec(
    "gpufleet_replica_leader",
    "gauge",
    "",
    (),
    "1 while this replica holds the leader lease (fleet-wide work and series), else 0.",
)
REPLICA_LEASE_AGE = MetricSpec(
    "gpufleet_replica_lease_age_seconds",
    "gauge",
    "seconds",
    (),
    "Seconds since this replica last renewed its leases; past cluster.lease_seconds "
    "others may take them. Absent before the first renewal.",
)
REPLICA: tuple[MetricSpec, ...] = (REPLICA_SHARDS, REPLICA_LEADER, REPLICA_LEASE_AGE)

CATALOGUE: tuple[MetricSpec, ...] = (
    FLEET_GPUS,
    FLEET_UTILISATION,
    FLEET_IDLE_COST,
    FLEET_POWER,
    GPU_STATE,
    GPU_IDLE,
    WORKLOAD_IDLE,
    WORKLOAD_WASTE,
    WORKLOAD_ENERGY,
    WORKLOAD_ESTIMATED_ENERGY,
    WORKLOAD_CARBON,
    WORKLOAD_INFO,
    *KUBE,
    CARBON_PUE,
    CARBON_INTENSITY,
    RECOMMENDATIONS_OPEN,
    RECOMMENDATION_SAVINGS,
    RECOMMENDATION_SAVINGS_LOW,
    *VERDICTS,
    BATCHES,
    REJECTED_BATCHES,
    SAMPLES,
    REJECTED_SAMPLES,
    LATE_SAMPLES,
    IMPLAUSIBLE_SAMPLES,
    INGEST_SECONDS,
    INTAKE_CORRUPT_RECORDS,
    LAST_INGEST,
    PENDING_SAMPLES,
    LAG,
    NODE_CLOCK_OFFSET,
    LEDGER_UP,
    *WRITE_PATH,
    EXPORT_ERRORS,
    *NOTIFY,
    *INFLUX,
    *AUTH,
    *ADMISSION,
    *PLANS,
    *SAVINGS,
    *REPLICA,
)
