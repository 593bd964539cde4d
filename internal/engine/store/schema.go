// Package store is coordination-engine's SQLite adapter: triggers, coordination
// leases, checkpoints, attached endpoints and receipts.
package store

import (
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Times are INTEGER Unix milliseconds (UTC). Prompts are never stored: they are
// generated from the trigger and checkpoint when a wake is sent.
const schemaV1 = `
-- The idempotency key (source, source_id, source_revision, target_repo) is unique,
-- so repeated observations collapse to one trigger (spec section 2).
CREATE TABLE triggers (
	id              TEXT PRIMARY KEY,
	source          TEXT NOT NULL CHECK (source IN ('workplan', 'task', 'message', 'checkpoint')),
	source_id       TEXT NOT NULL,
	source_revision TEXT NOT NULL,
	target_repo     TEXT NOT NULL,
	target_agent    TEXT,
	reason          TEXT NOT NULL CHECK (reason IN ('task_actionable', 'dependency_satisfied', 'inbox_message', 'retry_due', 'checkpoint_resume')),
	state           TEXT NOT NULL CHECK (state IN ('pending', 'leased', 'gated', 'completed', 'stopped', 'superseded')),
	gate_reason     TEXT,
	observed_at     INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	UNIQUE (source, source_id, source_revision, target_repo)
) STRICT;
CREATE INDEX triggers_state ON triggers(state, observed_at);
CREATE INDEX triggers_source ON triggers(source, source_id);

CREATE TABLE endpoints (
	coordination_endpoint_id TEXT PRIMARY KEY,
	tamq_endpoint_id         TEXT NOT NULL,     -- tmux-amq-<pid>
	tmux_session             TEXT,
	agent_command            TEXT,
	protocol_version         TEXT NOT NULL,     -- negotiated at attach
	capabilities             TEXT NOT NULL,     -- JSON array
	state                    TEXT NOT NULL CHECK (state IN ('attached', 'detached')),
	attached_at              INTEGER NOT NULL,
	updated_at               INTEGER NOT NULL
) STRICT;

CREATE TABLE endpoint_repos (
	coordination_endpoint_id TEXT NOT NULL REFERENCES endpoints(coordination_endpoint_id),
	repo                     TEXT NOT NULL,
	path                     TEXT NOT NULL,     -- as the session reported it; checked against gita
	mode                     TEXT NOT NULL CHECK (mode IN ('trigger', 'manual')),
	PRIMARY KEY (coordination_endpoint_id, repo)
) STRICT;

-- WorkerLease of spec section 4. A retried wake keeps its lease_id; the partial
-- unique index allows one live lease per trigger.
CREATE TABLE leases (
	lease_id                 TEXT PRIMARY KEY,
	trigger_id               TEXT NOT NULL REFERENCES triggers(id),
	owner                    TEXT NOT NULL DEFAULT 'coordination-engine' CHECK (owner = 'coordination-engine'),
	target_repo              TEXT NOT NULL,
	target_agent             TEXT,
	state                    TEXT NOT NULL CHECK (state IN ('offered', 'acknowledged', 'running', 'checkpointed', 'completed', 'retry_wait', 'stopped')),
	attempt                  INTEGER NOT NULL CHECK (attempt >= 1),
	acquired_at              INTEGER NOT NULL,
	expires_at               INTEGER NOT NULL,
	next_retry_at            INTEGER,
	last_checkpoint_at       INTEGER,
	coordination_endpoint_id TEXT REFERENCES endpoints(coordination_endpoint_id),
	local_lease_id           TEXT,              -- tamq's message id for the wake
	stop_reason              TEXT,
	policy_profile           TEXT NOT NULL,
	config_version           TEXT NOT NULL,
	updated_at               INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX leases_one_live_per_trigger ON leases(trigger_id) WHERE state NOT IN ('completed', 'stopped');
CREATE INDEX leases_expiry ON leases(state, expires_at);

CREATE TABLE checkpoints (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	lease_id       TEXT NOT NULL REFERENCES leases(lease_id),
	task_id        TEXT,
	summary        TEXT NOT NULL,
	files_changed  TEXT NOT NULL DEFAULT '[]',  -- JSON array of paths
	next_action    TEXT,
	blocked_reason TEXT CHECK (blocked_reason IS NULL OR blocked_reason IN ('human', 'secret', 'destructive', 'policy', 'dependency', 'unavailable')),
	recorded_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX checkpoints_lease ON checkpoints(lease_id, recorded_at);

-- What the observer last saw of State Hub (cursors, ETags), by key.
CREATE TABLE observer_state (
	key        TEXT PRIMARY KEY,
	value      TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

-- Sanitized receipts (spec section 7); projected_at NULL means still to be
-- published to State Hub.
CREATE TABLE receipts (
	id                       INTEGER PRIMARY KEY AUTOINCREMENT,
	at                       INTEGER NOT NULL,
	kind                     TEXT NOT NULL,
	trigger_id               TEXT,
	lease_id                 TEXT,
	status                   TEXT NOT NULL,
	reason                   TEXT,
	attempt                  INTEGER,
	next_retry_at            INTEGER,
	coordination_endpoint_id TEXT,
	policy_profile           TEXT,
	config_version           TEXT,
	detail                   TEXT,
	projected_at             INTEGER
) STRICT;
CREATE INDEX receipts_pending ON receipts(id) WHERE projected_at IS NULL;
CREATE INDEX receipts_trigger ON receipts(trigger_id, id);
`

// schemaV2 adds what the lease rules and the wake need: a lease keeps its
// retry budget (max_attempts, fixed when offered), the outcome of its
// current attempt's wake (NULL until tamq answered: the wake is still to be
// sent) and the tamq endpoint that took it; a receipt names tamq's message
// id of a wake; an endpoint is found again by its tamq id and tmux socket
// when tamq attaches again; a window keeps its agent command; a trigger may
// name the task it is about.
const schemaV2 = `
ALTER TABLE triggers ADD COLUMN task_id TEXT;
ALTER TABLE endpoints ADD COLUMN tmux_socket TEXT;
ALTER TABLE endpoint_repos ADD COLUMN command TEXT;  -- NULL runs the user's shell
ALTER TABLE leases ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0 CHECK (max_attempts >= 0);
ALTER TABLE leases ADD COLUMN wake_outcome TEXT CHECK (wake_outcome IS NULL OR wake_outcome IN ('resumed', 'started', 'unavailable'));
ALTER TABLE leases ADD COLUMN tamq_endpoint_id TEXT;
ALTER TABLE receipts ADD COLUMN local_message_id TEXT;
CREATE INDEX endpoints_tamq ON endpoints(tamq_endpoint_id);
CREATE INDEX leases_retry ON leases(next_retry_at) WHERE state = 'retry_wait';
CREATE INDEX leases_wake ON leases(acquired_at) WHERE state = 'offered' AND wake_outcome IS NULL;
CREATE INDEX receipts_lease ON receipts(lease_id, id);
`

// schemaV3 adds what observing State Hub needs: what a trigger's prompt
// names (its workplan, and a title or subject that passed the secret scan),
// the re-checks of a gated trigger, State Hub's id of a checkpoint posted
// there (recorded once), and a trigger found by its task.
const schemaV3 = `
ALTER TABLE triggers ADD COLUMN workplan_id TEXT;
ALTER TABLE triggers ADD COLUMN title TEXT;
ALTER TABLE triggers ADD COLUMN sender TEXT;
ALTER TABLE triggers ADD COLUMN gate_checks INTEGER NOT NULL DEFAULT 0 CHECK (gate_checks >= 0);
ALTER TABLE triggers ADD COLUMN next_check_at INTEGER;
ALTER TABLE checkpoints ADD COLUMN statehub_id TEXT;
CREATE UNIQUE INDEX checkpoints_statehub ON checkpoints(statehub_id) WHERE statehub_id IS NOT NULL;
CREATE INDEX triggers_task ON triggers(task_id, observed_at) WHERE task_id IS NOT NULL;
CREATE INDEX triggers_gated ON triggers(next_check_at) WHERE state = 'gated';
`

// schemaV4 adds what waiting needs (docs/observation.md, "Waiting is not a
// gate"): why a trigger waits (a code and words: no window, tamq not
// attached, manual mode, no agent running, the window busy with another
// task) instead of stopping; whether tamq says an agent runs in a window;
// the checkpoint a checkpoint_resume trigger resumes from (its text goes
// into the prompt, never into a receipt); and the result a lease was
// released with, since a lease that ended by release resumes nothing.
const schemaV4 = `
ALTER TABLE triggers ADD COLUMN wait_reason TEXT;
ALTER TABLE triggers ADD COLUMN wait_detail TEXT;
ALTER TABLE triggers ADD COLUMN checkpoint TEXT;
ALTER TABLE endpoint_repos ADD COLUMN no_agent INTEGER NOT NULL DEFAULT 0 CHECK (no_agent IN (0, 1));
ALTER TABLE leases ADD COLUMN released TEXT CHECK (released IS NULL OR released IN ('completed', 'failed', 'blocked'));
CREATE INDEX checkpoints_task ON checkpoints(task_id, recorded_at) WHERE task_id IS NOT NULL;
CREATE INDEX leases_repo_live ON leases(target_repo) WHERE state NOT IN ('completed', 'stopped');
`

// schemaV5 adds what the lists a person reads need without reading
// receipts, which are purged: who acknowledged a lease's current attempt,
// and when (tamq's broker or the agent's own command), and the attempt a
// checkpoint was recorded in. What was recorded before takes them from its
// receipts, when kept.
const schemaV5 = `
ALTER TABLE leases ADD COLUMN acked_by TEXT CHECK (acked_by IS NULL OR acked_by IN ('broker', 'agent', 'operator', 'tamq'));
ALTER TABLE leases ADD COLUMN acked_at INTEGER;
UPDATE leases SET (acked_by, acked_at) = (
	SELECT json_extract(r.detail, '$.by'), r.at FROM receipts r
	WHERE r.lease_id = leases.lease_id AND r.kind = 'lease.acknowledged' AND r.attempt = leases.attempt
		AND json_extract(r.detail, '$.by') IN ('broker', 'agent', 'operator', 'tamq')
	ORDER BY r.id DESC LIMIT 1)
WHERE state NOT IN ('offered', 'retry_wait');
ALTER TABLE checkpoints ADD COLUMN attempt INTEGER CHECK (attempt IS NULL OR attempt >= 1);
UPDATE checkpoints SET attempt = (
	SELECT r.attempt FROM receipts r
	WHERE r.lease_id = checkpoints.lease_id AND r.kind = 'checkpoint.recorded' AND r.at >= checkpoints.recorded_at AND r.attempt >= 1
	ORDER BY r.id LIMIT 1);
CREATE INDEX checkpoints_recorded ON checkpoints(recorded_at);
`

// Migrations is coordination-engine's schema history; append, never edit a released entry.
var Migrations = []sqlitedb.Migration{
	{Version: 1, Name: "triggers, leases, checkpoints, endpoints, receipts", TouchesData: true, SQL: schemaV1},
	{Version: 2, Name: "lease retry budget and wake outcome, endpoint sockets, receipt message ids", TouchesData: true, SQL: schemaV2},
	{Version: 3, Name: "State Hub observation: trigger titles and gate checks, State Hub checkpoint ids", TouchesData: true, SQL: schemaV3},
	{Version: 4, Name: "waiting triggers, windows without an agent, resumed checkpoints, release results", TouchesData: true, SQL: schemaV4},
	{Version: 5, Name: "who acknowledged a lease's attempt, and when; a checkpoint's attempt", TouchesData: true, SQL: schemaV5},
}
