"""The ledger's schema as ordered migrations, one history for SQLite and PostgreSQL, and
SQLite's connection settings.

``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``. Each runs in its own
transaction together with the ``schema_version`` update, so a crash leaves the database at
one version or the next, never between. Never edit a shipped migration: append one.

The migrations are written in SQLite's DDL; collector/ledger/pg_schema.py gives
PostgreSQL's from them (types mapped, rollup tables partitioned by time, an override only
where the SQL truly differs).
"""

from __future__ import annotations

import sqlite3

from collector.ledger.files import check_writable
from collector.ledger.records import LedgerError

#: the rollups' columns as V1 made them (V1 and V5 create and fill these; never edit)
_V1_USAGE_COLUMNS = (
    "active_seconds",
    "idle_seconds",
    "allocated_idle_seconds",
    "unknown_seconds",
    "energy_joules",
    "estimated_energy_joules",
    "idle_energy_joules",
    "idle_cost",
    "cost",
    "carbon_grams",
)
#: the rollups' columns now, in ``Usage``'s field order (V10 added the SM-seconds)
USAGE_COLUMNS = (*_V1_USAGE_COLUMNS, "sm_activity_seconds")

_USAGE_SQL = ",\n".join(f"  {name} REAL NOT NULL DEFAULT 0" for name in _V1_USAGE_COLUMNS)

_V1 = f"""
CREATE TABLE gpus (
  uuid TEXT PRIMARY KEY, node TEXT NOT NULL, model TEXT NOT NULL, name TEXT NOT NULL,
  gpu_index INTEGER NOT NULL, info_json BLOB NOT NULL, mig_parent_uuid TEXT, mig_profile TEXT,
  first_seen REAL NOT NULL, last_seen REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE workloads (
  key TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, namespace TEXT NOT NULL,
  team TEXT NOT NULL, user TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE gpu_usage_hourly (
  hour_start REAL NOT NULL, gpu_uuid TEXT NOT NULL REFERENCES gpus(uuid),
{_USAGE_SQL},
  PRIMARY KEY (hour_start, gpu_uuid)
) WITHOUT ROWID;
CREATE TABLE workload_usage_hourly (
  hour_start REAL NOT NULL, workload_key TEXT NOT NULL REFERENCES workloads(key),
{_USAGE_SQL},
  PRIMARY KEY (hour_start, workload_key)
) WITHOUT ROWID;
CREATE TABLE gpu_usage_total (
  gpu_uuid TEXT PRIMARY KEY REFERENCES gpus(uuid),
{_USAGE_SQL}
) WITHOUT ROWID;
CREATE TABLE workload_usage_total (
  workload_key TEXT PRIMARY KEY REFERENCES workloads(key),
{_USAGE_SQL}
) WITHOUT ROWID;
CREATE TABLE idle_episodes (
  gpu_uuid TEXT NOT NULL REFERENCES gpus(uuid), node TEXT NOT NULL,
  start_time REAL NOT NULL, end_time REAL NOT NULL, workload_key TEXT,
  PRIMARY KEY (gpu_uuid, start_time)
) WITHOUT ROWID;
CREATE INDEX idle_episodes_by_end ON idle_episodes (end_time);
CREATE TABLE cursors (
  gpu_uuid TEXT PRIMARY KEY REFERENCES gpus(uuid), applied_until REAL NOT NULL,
  last_sample BLOB NOT NULL, open_episode_start REAL, open_episode_workload TEXT
) WITHOUT ROWID;
CREATE TABLE acks (
  node TEXT NOT NULL, boot_id TEXT NOT NULL, seq INTEGER NOT NULL, received_at REAL NOT NULL,
  PRIMARY KEY (node, boot_id, seq)
) WITHOUT ROWID;
CREATE INDEX acks_by_received ON acks (received_at);
CREATE TABLE pending_batches (
  id INTEGER PRIMARY KEY AUTOINCREMENT, received_at REAL NOT NULL,
  sample_count INTEGER NOT NULL, body BLOB NOT NULL
);
CREATE TABLE workload_stats (
  workload_key TEXT PRIMARY KEY REFERENCES workloads(key),
  observed_seconds REAL NOT NULL, memory_peak_bytes INTEGER NOT NULL,
  sm_activity_peak REAL NOT NULL, gpu_model TEXT NOT NULL, gpu_count INTEGER NOT NULL,
  last_seen REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE workload_histograms (
  workload_key TEXT NOT NULL REFERENCES workloads(key), metric TEXT NOT NULL,
  bucket INTEGER NOT NULL, seconds REAL NOT NULL,
  PRIMARY KEY (workload_key, metric, bucket)
) WITHOUT ROWID;
CREATE TABLE recommendations (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, subject TEXT NOT NULL, status TEXT NOT NULL,
  opened_at REAL NOT NULL, updated_at REAL NOT NULL, resolved_at REAL,
  money_per_month REAL NOT NULL, dismissed_by TEXT NOT NULL DEFAULT '', body BLOB NOT NULL
);
CREATE INDEX recommendations_by_status ON recommendations (status);
"""

#: notifications (collector/notify/outbox.py) and auto-release decisions (collector/actions/log.py)
_V2 = """
CREATE TABLE notify_outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT, channel TEXT NOT NULL, event_key TEXT NOT NULL,
  created_at REAL NOT NULL, body BLOB NOT NULL, state TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at REAL NOT NULL,
  message_id TEXT, sent_at REAL,
  UNIQUE (channel, event_key)
);
CREATE INDEX notify_outbox_due ON notify_outbox (state, channel, next_attempt_at);
CREATE INDEX notify_outbox_sent ON notify_outbox (channel, sent_at);
CREATE TABLE notify_state (
  subject TEXT PRIMARY KEY, status TEXT NOT NULL, fingerprint TEXT NOT NULL,
  notified_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE action_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, workload_key TEXT NOT NULL,
  episode_start REAL NOT NULL, stage TEXT NOT NULL, decision TEXT NOT NULL,
  mode TEXT NOT NULL, dry_run INTEGER NOT NULL, detail TEXT NOT NULL,
  UNIQUE (workload_key, episode_start, stage)
);
CREATE TABLE action_workloads (
  workload_key TEXT PRIMARY KEY, first_seen REAL NOT NULL, last_seen REAL NOT NULL
) WITHOUT ROWID;
"""

#: acknowledged batches as ranges of consecutive seqs per (node, boot): one row per agent
#: boot instead of one per batch (a 1,000-GPU fleet acks ~2 million batches a day)
V3 = """
CREATE TABLE ack_ranges (
  node TEXT NOT NULL, boot_id TEXT NOT NULL, first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL, received_at REAL NOT NULL,
  PRIMARY KEY (node, boot_id, first_seq)
) WITHOUT ROWID;
INSERT INTO ack_ranges
  SELECT node, boot_id, MIN(seq), MAX(seq), MAX(received_at) FROM (
    SELECT node, boot_id, seq, received_at,
           seq - ROW_NUMBER() OVER (PARTITION BY node, boot_id ORDER BY seq) AS run
    FROM acks)
  GROUP BY node, boot_id, run;
DROP TABLE acks;
"""

#: acknowledged batches live in the batch log (collector/ledger/batch_log.py) until applied; this
#: names those applied, in the commit that applied them. ``pending_batches`` is only read
#: once, to move a schema-3 ledger's rows into the log (collector/ledger/accepted.py).
_V4 = """
CREATE TABLE intake_done (batch_id INTEGER PRIMARY KEY) WITHOUT ROWID;
"""

#: per-workload usage per UTC day (the sum of that day's hourly rows, kept by the same
#: commit): a long /v1/workloads range reads a row a day, hours only at its partial ends
V5_TABLE = f"""
CREATE TABLE workload_usage_daily (
  day_start REAL NOT NULL, workload_key TEXT NOT NULL REFERENCES workloads(key),
{_USAGE_SQL},
  PRIMARY KEY (day_start, workload_key)
) WITHOUT ROWID;
"""


def v5_fill(day_of_hour: str) -> str:
    return f"""
INSERT INTO workload_usage_daily (day_start, workload_key, {", ".join(_V1_USAGE_COLUMNS)})
  SELECT {day_of_hour}, workload_key,
         {", ".join(f"SUM({c})" for c in _V1_USAGE_COLUMNS)}
  FROM workload_usage_hourly GROUP BY 1, 2;
"""


_V5 = V5_TABLE + v5_fill("hour_start - (hour_start % 86400)")

#: PostgreSQL's durable intake (pg_schema.py, pg_intake.py). SQLite keeps its acknowledged
#: batches in the batch log beside the file instead, so this version adds nothing there.
_V6 = ""

#: the read schema (docs/ledger-postgresql.md): views a Grafana PostgreSQL datasource or a
#: BI tool charts without our API. Times are Unix seconds (UTC day or hour starts); their
#: columns are part of the contract: add columns, never rename or drop them.
_V7 = """
CREATE VIEW waste_daily_by_team AS
  SELECT d.day_start, w.team,
         SUM(d.idle_seconds) / 3600.0 AS idle_gpu_hours,
         SUM(d.allocated_idle_seconds) / 3600.0 AS allocated_idle_gpu_hours,
         SUM(d.idle_cost) AS idle_cost,
         SUM(d.idle_energy_joules) AS idle_energy_joules
  FROM workload_usage_daily d JOIN workloads w ON w.key = d.workload_key
  GROUP BY d.day_start, w.team;
CREATE VIEW energy_daily_by_workload AS
  SELECT d.day_start, w.key AS workload_key, w.kind, w.name, w.namespace, w.team,
         d.energy_joules, d.energy_joules / 3600000.0 AS energy_kwh,
         d.estimated_energy_joules, d.carbon_grams, d.cost,
         d.active_seconds / 3600.0 AS active_gpu_hours
  FROM workload_usage_daily d JOIN workloads w ON w.key = d.workload_key;
CREATE VIEW gpu_hours_hourly_by_model AS
  SELECT h.hour_start, g.model, g.node, COUNT(*) AS gpus,
         SUM(h.active_seconds) / 3600.0 AS active_gpu_hours,
         SUM(h.idle_seconds) / 3600.0 AS idle_gpu_hours,
         SUM(h.unknown_seconds) / 3600.0 AS unknown_gpu_hours,
         SUM(h.energy_joules) AS energy_joules, SUM(h.idle_cost) AS idle_cost
  FROM gpu_usage_hourly h JOIN gpus g ON g.uuid = h.gpu_uuid
  WHERE g.mig_parent_uuid IS NULL
  GROUP BY h.hour_start, g.model, g.node;
"""

#: answers from chat buttons and signed links (collector/actions/answer_log.py): who answered
#: what, when, and what came of it; a kept workload's exemption ends at ``kept_until``.
#: ``id`` is the service's own id for the press, so a replayed one is refused. Plain SQL
#: that SQLite and PostgreSQL read alike (DOUBLE PRECISION: REAL is 4 bytes in PostgreSQL)
_V8 = """
CREATE TABLE answers (
  id TEXT PRIMARY KEY, answered_at DOUBLE PRECISION NOT NULL, service TEXT NOT NULL,
  service_user TEXT NOT NULL, who TEXT NOT NULL, action TEXT NOT NULL,
  recommendation_id TEXT NOT NULL, workload_key TEXT NOT NULL, outcome TEXT NOT NULL,
  detail TEXT NOT NULL, kept_until DOUBLE PRECISION
);
CREATE INDEX answers_by_workload ON answers (workload_key, kept_until);
"""
#: collector replicas on one PostgreSQL (pg_schema.py: intake shards, live GPU state, the
#: ledger-wide version); one collector on SQLite needs none of it
_V9 = ""

#: a pod's owner, the top of its owner chain ("Deployment/ml/llm-serve"), its scheduler
#: queue and priority class (collector/kube)
_V10 = """
ALTER TABLE workloads ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE workloads ADD COLUMN queue TEXT NOT NULL DEFAULT '';
ALTER TABLE workloads ADD COLUMN priority_class TEXT NOT NULL DEFAULT '';
"""

#: SM activity x seconds in every usage rollup (``Usage.sm_activity_seconds``), so a report
#: gives a period's mean SM activity over held time; rows from before say 0 (not measured)
_V11 = "".join(
    f"ALTER TABLE {table} ADD COLUMN sm_activity_seconds REAL NOT NULL DEFAULT 0;\n"
    for table in (
        "gpu_usage_hourly",
        "gpu_usage_total",
        "workload_usage_hourly",
        "workload_usage_total",
        "workload_usage_daily",
    )
)

#: the efficiency reports' periods, one row per subject and period, claimed before the
#: report is sent (collector/notify/report_log.py): a period that ended while the
#: collector was down is sent when it starts, and none twice, whatever restarts or replicas
_V12 = """
CREATE TABLE reports_sent (
  subject TEXT NOT NULL, name TEXT NOT NULL, every TEXT NOT NULL,
  period_end DOUBLE PRECISION NOT NULL, outcome TEXT NOT NULL,
  recorded_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (subject, name, every, period_end)
);
"""

#: why and when each quarantined batch was set aside, in PostgreSQL's intake row (its
#: quarantine is the row; SQLite's is a folder beside the batch log): nothing on SQLite
_V13 = ""

MIGRATIONS: tuple[str, ...] = (
    _V1, _V2, V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10, _V11, _V12, _V13,
)  # fmt: skip


def schema_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row[0] is not None else 0


def migrate(conn: sqlite3.Connection, migrations: tuple[str, ...] = MIGRATIONS) -> int:
    """Bring the schema up to ``len(migrations)``; returns the version now in force.

    Raises LedgerError when the database is newer than this code (never downgrades).
    ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    current = schema_version(conn)
    if current > len(migrations):
        raise LedgerError(
            f"ledger schema version {current} is newer than this gpufleet understands "
            f"(up to {len(migrations)}); run a newer gpufleet or point ledger.url elsewhere"
        )
    for version in range(current + 1, len(migrations) + 1):
        script = migrations[version - 1]
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE;\n{script}\n;"
                f"DELETE FROM schema_version; INSERT INTO schema_version VALUES ({version});"
                "\nCOMMIT;"
            )
        except sqlite3.Error as err:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise LedgerError(f"ledger migration to version {version} failed: {err}") from err
    return len(migrations)


def configure(conn: sqlite3.Connection, *, synchronous: str) -> None:
    """Per-connection settings: WAL (files only), durability, foreign keys, busy timeout.

    WAL lets API reads run while the writer commits. ``synchronous=FULL`` fsyncs the WAL
    on every commit, so an acknowledged batch survives a power loss too; ``NORMAL`` is
    still safe against ``kill -9`` (the WAL is in the OS page cache) but a power loss may
    drop the last commits.
    """
    if synchronous not in ("FULL", "NORMAL"):
        raise LedgerError(f"ledger synchronous: must be FULL or NORMAL, got {synchronous!r}")
    conn.execute("PRAGMA busy_timeout = 10000")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode not in ("wal", "memory"):
        raise LedgerError(f"ledger: could not switch to WAL journal mode (got {mode!r})")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA cache_size = -65536")  # 64 MiB: the hot hourly rows stay cached


def sqlite_path(url: str) -> str:
    """The SQLite file for a ledger URL: a path, ``sqlite:///path`` or ``:memory:``
    (a ``postgresql://`` URL is collector/ledger/postgres.py's: see ``is_postgres_url``)."""
    if is_postgres_url(url):
        raise LedgerError("ledger.url: a PostgreSQL URL names no SQLite file")
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://").removeprefix("/")
        return path or ":memory:"
    if "://" in url:
        raise LedgerError(f"ledger.url: unsupported scheme in {url.split('://')[0]!r}")
    if not url:
        raise LedgerError("ledger.url: empty")
    return url


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def connect(path: str, synchronous: str) -> sqlite3.Connection:
    """A connection to the SQLite file at ``path``, configured (``configure``); a file
    this process cannot write is refused first (collector/ledger/files.py)."""
    if path != ":memory:":
        check_writable(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        configure(conn, synchronous=synchronous)
    except sqlite3.Error as err:
        raise LedgerError(f"ledger: cannot open {path!r}: {err}") from err
    return conn
