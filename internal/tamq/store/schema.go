// Package store is tamq's SQLite adapter: the schema of the durable message queue
// and the queries behind each state transition. Rows map to the domain's types
// (package queue), never to the wire's.
package store

import (
	"database/sql"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Times are INTEGER Unix milliseconds (UTC): they sort, compare and index
// cheaply; ids are time-ordered UUIDv7 strings, which break ties within a
// millisecond. Message bodies are stored here and nowhere else (spec section 9.1:
// they stay local unless explicitly exported); receipts never hold them.
const schemaV1 = `
CREATE TABLE endpoints (
	id               TEXT PRIMARY KEY,           -- tmux-amq-<tmux server pid>
	tmux_socket      TEXT NOT NULL,              -- path of the tmux server's socket
	tmux_server_pid  INTEGER NOT NULL,
	session_name     TEXT NOT NULL,
	state            TEXT NOT NULL CHECK (state IN ('connected', 'disconnected')),
	coordination_endpoint_id TEXT,               -- granted by coordination-engine at attach
	protocol_version TEXT,                       -- negotiated at attach
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
) STRICT;

-- Within an endpoint a repo slug maps to exactly one window.
CREATE TABLE windows (
	endpoint_id TEXT NOT NULL REFERENCES endpoints(id),
	repo        TEXT NOT NULL,
	repo_path   TEXT NOT NULL,
	window_id   TEXT,                           -- tmux @N
	pane_id     TEXT,                           -- tmux %N
	mode        TEXT NOT NULL CHECK (mode IN ('trigger', 'manual')),
	command     TEXT,                           -- the agent command; NULL runs the user's shell
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (endpoint_id, repo)
) STRICT;

CREATE TABLE messages (
	id               TEXT PRIMARY KEY,          -- local message id (UUIDv7)
	batch_id         TEXT NOT NULL,             -- a send is its own batch; a replay shares one
	endpoint_id      TEXT REFERENCES endpoints(id), -- the endpoint it is bound to
	coordination_endpoint_id TEXT,
	sender           TEXT NOT NULL,             -- repo slug, or the operator label
	sender_kind      TEXT NOT NULL CHECK (sender_kind IN ('worker', 'operator', 'coordination', 'replay')),
	target_repo      TEXT NOT NULL,
	body             TEXT NOT NULL CHECK (length(CAST(body AS BLOB)) <= 8192),
	ack_mode         TEXT NOT NULL CHECK (ack_mode IN ('injected', 'acknowledged')),
	state            TEXT NOT NULL CHECK (state IN ('queued', 'delivering', 'injected', 'awaiting_ack', 'acknowledged', 'failed')),
	attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 0 AND 9),
	idempotency_key  TEXT,                      -- wakes: the coordination lease id
	request_hash     TEXT,                      -- detects an idempotency key reused for another request
	correlation_id   TEXT,                      -- wakes: the trigger revision
	replay_of        TEXT,                      -- the original message id of a replayed message
	policy_profile   TEXT NOT NULL,             -- name@version in force when accepted
	config_version   TEXT NOT NULL,             -- effective config version when accepted
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	next_attempt_at  INTEGER,                   -- when a queued message may be claimed
	ack_deadline_at  INTEGER,                   -- awaiting_ack: redeliver after this
	injected_at      INTEGER,                   -- when the bytes were last written
	acked_at         INTEGER,
	failed_at        INTEGER,
	last_error       TEXT                       -- sanitized: never terminal output or body text
) STRICT;
CREATE UNIQUE INDEX messages_idempotency_key ON messages(idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX messages_queue ON messages(state, endpoint_id, target_repo, created_at, id);
CREATE INDEX messages_ack_deadline ON messages(ack_deadline_at) WHERE state = 'awaiting_ack';

-- A claim for delivery is a local lease with an expiry: a crash mid-delivery
-- leaves the row, and the same message id is delivered again after restart.
CREATE TABLE delivery_leases (
	message_id  TEXT PRIMARY KEY REFERENCES messages(id),
	lease_id    TEXT NOT NULL UNIQUE,
	attempt     INTEGER NOT NULL CHECK (attempt >= 1),
	holder      TEXT NOT NULL,                  -- the service instance or broker writing it
	acquired_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX delivery_leases_expiry ON delivery_leases(expires_at);

-- Sanitized audit receipts: ids, states, reasons, counts; never bodies,
-- prompts, credentials or terminal output. projected_at is set once State Hub
-- has them; NULL means pending.
CREATE TABLE receipts (
	id                       INTEGER PRIMARY KEY AUTOINCREMENT,
	at                       INTEGER NOT NULL,
	kind                     TEXT NOT NULL,     -- e.g. message.transition, service.shutdown, auth.refused
	subject_id               TEXT,              -- message, endpoint or purge id
	status                   TEXT NOT NULL,
	reason                   TEXT,
	attempt                  INTEGER,
	next_retry_at            INTEGER,
	endpoint_id              TEXT,
	coordination_endpoint_id TEXT,
	policy_profile           TEXT,
	config_version           TEXT,
	detail                   TEXT,              -- sanitized JSON object
	projected_at             INTEGER
) STRICT;
CREATE INDEX receipts_pending ON receipts(id) WHERE projected_at IS NULL;
`

// schemaV2 serves history, export, replay and purge. History pages run newest
// first on (created_at, id) within a repo as sender or as target, or over all
// messages; a replay is known by the original message and the endpoint it was
// replayed into (replay_endpoint_id never changes, unlike endpoint_id, which a
// rebind moves), so replaying the same line there twice adds nothing.
const schemaV2 = `
ALTER TABLE messages ADD COLUMN replay_endpoint_id TEXT;
CREATE UNIQUE INDEX messages_replay ON messages(replay_of, replay_endpoint_id) WHERE replay_of IS NOT NULL;
CREATE INDEX messages_created ON messages(created_at, id);
CREATE INDEX messages_sender ON messages(sender, created_at, id);
CREATE INDEX messages_target ON messages(target_repo, created_at, id);
CREATE INDEX messages_batch ON messages(batch_id);
`

// schemaV3 lets the operator forget an endpoint that is gone for good: it
// stays in history (its messages name it) but is no longer listed, counted,
// restored or offered as a replacement.
const schemaV3 = `
ALTER TABLE endpoints ADD COLUMN forgotten_at INTEGER;
`

// schemaV4 keeps facts about the database itself. "instance" is a random id
// made once, when the migration runs: published receipts are named
// "tamq:<instance>:<row id>", unique across databases (a new database starts
// its row ids at 1 again) and the same across restarts, so State Hub stores a
// receipt sent twice once.
const schemaV4 = `
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;
INSERT INTO meta (key, value) VALUES ('instance', lower(hex(randomblob(8))));
`

// Migrations is tamq's schema history; append, never edit a released entry.
var Migrations = []sqlitedb.Migration{
	{Version: 1, Name: "messages, delivery leases, endpoints, windows, receipts", TouchesData: true, SQL: schemaV1},
	{Version: 2, Name: "history indexes and replay provenance", TouchesData: true, SQL: schemaV2},
	{Version: 3, Name: "forgotten endpoints", TouchesData: false, SQL: schemaV3},
	{Version: 4, Name: "database instance id", TouchesData: false, SQL: schemaV4},
	{Version: 5, Name: "compact receipts", TouchesData: true, Up: migrateV5},
	{Version: 6, Name: "compact messages", TouchesData: true, Up: migrateV6},
	{Version: 7, Name: "cancelled wakes", TouchesData: true, Up: migrateV7},
	{Version: 8, Name: "held deliveries", TouchesData: true, Up: migrateV8},
	{Version: 9, Name: "how each window's agent ended", TouchesData: false, SQL: schemaV9},
}

// schemaV9 records how each window's agent ended, as the service saw it:
// exited (with its exit status when tmux knew it) or its window closed. A
// restart reopens only the windows whose agent was running: what a person
// quit or closed stays ended (docs/operations.md, "Start, stop, serve").
// NULL: it was running when last seen.
const schemaV9 = `
ALTER TABLE windows ADD COLUMN agent_end TEXT CHECK (agent_end IS NULL OR agent_end IN ('exited', 'closed'));
ALTER TABLE windows ADD COLUMN exit_status INTEGER;
ALTER TABLE windows ADD COLUMN ended_at INTEGER;
`

// schemaV5 stores receipts compactly: a million messages' receipts (three or
// more each) took more of the file than the messages. Kinds, states and the
// usual reasons are small integer codes (receipt_codes); a UUID subject is
// its 16 bytes; a transition of a message leaves out what the message row
// holds (of_message = 1: target, sender kind, ack mode, policy profile and
// configuration version are the message's, "to" is the status, "from" is
// from_state); empty values are NULL; projected_at is kept as the
// milliseconds after at. Row ids stay as they were (they name published
// receipts), and AUTOINCREMENT still never reuses one. The view receipts
// reads every row back as the table of version 4 held it.
const schemaV5Tables = `
CREATE TABLE receipt_codes (
	code INTEGER PRIMARY KEY,
	text TEXT NOT NULL UNIQUE
) STRICT;

CREATE TABLE receipt_rows (
	id                       INTEGER PRIMARY KEY AUTOINCREMENT,
	at                       INTEGER NOT NULL,
	kind                     ANY NOT NULL,      -- a receipt_codes code, or the kind's text
	subject                  ANY,               -- a UUID as its 16 bytes, any other id as text
	status                   ANY NOT NULL,      -- code or text
	reason                   ANY,               -- code or text
	from_state               INTEGER,           -- of_message rows: the state left, as a code
	attempt                  INTEGER,
	next_retry_at            INTEGER,
	endpoint_id              TEXT,
	coordination_endpoint_id TEXT,
	policy_profile           TEXT,
	config_version           TEXT,
	detail                   TEXT,              -- sanitized JSON object: what no column holds
	projected_after          INTEGER,           -- ms from at until State Hub had it; NULL: pending
	of_message               INTEGER            -- 1: a transition of message subject (see above)
) STRICT;
CREATE INDEX receipt_rows_pending ON receipt_rows(id) WHERE projected_after IS NULL;
`

// receiptsView reads receipt_rows back in the columns and values of the
// version 4 table. Version 6 replaces it (receiptsViewV6).
func receiptsView() string {
	return `
CREATE VIEW receipts AS SELECT r.id AS id, r.at AS at, ` + codeTextSQL("r.kind") + ` AS kind,
	` + subjectTextSQL("r.subject") + ` AS subject_id,
	` + codeTextSQL("r.status") + ` AS status, ` + codeTextSQL("r.reason") + ` AS reason,
	r.attempt AS attempt, r.next_retry_at AS next_retry_at, r.endpoint_id AS endpoint_id,
	r.coordination_endpoint_id AS coordination_endpoint_id,
	CASE WHEN r.of_message THEN NULLIF(m.policy_profile, '') ELSE r.policy_profile END AS policy_profile,
	CASE WHEN r.of_message THEN NULLIF(m.config_version, '') ELSE r.config_version END AS config_version,
	CASE WHEN r.of_message THEN json_patch(json_patch('{}', json_object('ack_mode', m.ack_mode,
		'from', (SELECT text FROM receipt_codes WHERE code = r.from_state), 'sender_kind', m.sender_kind,
		'target', m.target_repo, 'to', ` + codeTextSQL("r.status") + `)), COALESCE(r.detail, '{}'))
	ELSE r.detail END AS detail,
	r.at + r.projected_after AS projected_at
FROM receipt_rows r LEFT JOIN messages m ON r.of_message AND m.id = ` + subjectTextSQL("r.subject") + `;
`
}

// migrateV5 converts the receipts of version 4 in place, in the
// migration's transaction, with the same rules as encodeReceipt.
func migrateV5(tx *sql.Tx) error {
	if _, err := tx.Exec(schemaV5Tables); err != nil {
		return err
	}
	for code, text := range receiptCodes {
		if _, err := tx.Exec(`INSERT INTO receipt_codes (code, text) VALUES (?, ?)`, code, text); err != nil {
			return err
		}
	}
	code := func(expr string) string {
		return `COALESCE((SELECT code FROM receipt_codes WHERE text = ` + expr + `), ` + expr + `)`
	}
	// repeats is repeatsMessage on a version 4 row o and its message m.
	const repeats = `o.kind = 'message.transition' AND m.id IS NOT NULL AND json_valid(o.detail) AND json_type(o.detail) = 'object'
		AND json_type(o.detail, '$.to') = 'text' AND json_extract(o.detail, '$.to') = o.status
		AND json_type(o.detail, '$.target') = 'text' AND json_extract(o.detail, '$.target') = m.target_repo
		AND json_type(o.detail, '$.sender_kind') = 'text' AND json_extract(o.detail, '$.sender_kind') = m.sender_kind
		AND json_type(o.detail, '$.ack_mode') = 'text' AND json_extract(o.detail, '$.ack_mode') = m.ack_mode
		AND COALESCE(o.policy_profile, '') = m.policy_profile AND COALESCE(o.config_version, '') = m.config_version`
	fromCode := `CASE WHEN json_type(o.detail, '$.from') = 'text'
		THEN (SELECT code FROM receipt_codes WHERE text = json_extract(o.detail, '$.from')) END`
	if _, err := tx.Exec(`INSERT INTO receipt_rows (id, at, kind, subject, status, reason, from_state, attempt, next_retry_at,
			endpoint_id, coordination_endpoint_id, policy_profile, config_version, detail, projected_after, of_message)
		SELECT id, at, ` + code("kind") + `, ` + subjectSQL("subject_id") + `, ` + code("status") + `,
			` + code("reason") + `, CASE WHEN rep THEN from_code END, attempt, next_retry_at,
			endpoint_id, coordination_endpoint_id,
			CASE WHEN rep THEN NULL ELSE policy_profile END, CASE WHEN rep THEN NULL ELSE config_version END,
			CASE WHEN rep THEN NULLIF(json_remove(detail, '$.to', '$.target', '$.sender_kind', '$.ack_mode',
				CASE WHEN from_code IS NOT NULL THEN '$.from' ELSE '$.to' END), '{}') ELSE detail END,
			projected_at - at, CASE WHEN rep THEN 1 END
		FROM (SELECT o.*, (` + repeats + `) AS rep, ` + fromCode + ` AS from_code
			FROM receipts o LEFT JOIN messages m ON o.kind = 'message.transition' AND m.id = o.subject_id)
		ORDER BY id`); err != nil {
		return err
	}
	// AUTOINCREMENT's high-water mark carries over, so an id once used (by
	// a receipt since purged) is never given again.
	if _, err := tx.Exec(`DELETE FROM sqlite_sequence WHERE name = 'receipt_rows';
		INSERT INTO sqlite_sequence (name, seq) SELECT 'receipt_rows', max(seq) FROM sqlite_sequence WHERE name = 'receipts' HAVING count(*) > 0;
		DROP TABLE receipts;` + receiptsView() + schemaV5Indexes); err != nil {
		return err
	}
	return nil
}

// schemaV5Indexes are smaller message indexes. The history indexes hold
// the creation time without the 36-byte id: a page reads its rows anyway,
// and SQLite sorts the few that share a millisecond. The queue index holds
// only queued messages, the only ones the dispatcher looks up by window; a
// plain state index serves the counts by state. The batch index holds only
// replayed messages: a send is its own batch (batch_id = id), found by id.
const schemaV5Indexes = `
DROP INDEX messages_created;
DROP INDEX messages_sender;
DROP INDEX messages_target;
CREATE INDEX messages_created ON messages(created_at);
CREATE INDEX messages_sender ON messages(sender, created_at);
CREATE INDEX messages_target ON messages(target_repo, created_at);
DROP INDEX messages_queue;
CREATE INDEX messages_queue ON messages(endpoint_id, target_repo, created_at, id) WHERE state = 'queued';
CREATE INDEX messages_state ON messages(state);
DROP INDEX messages_batch;
CREATE INDEX messages_batch ON messages(batch_id) WHERE batch_id <> id;
`
