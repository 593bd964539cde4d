package store

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
)

// Codes of a message row's enum columns (schema version 6): a value is
// stored as its index here. The values most of a long history holds come
// first, as SQLite stores 0 and 1 in no bytes at all. Never change or
// reorder them: rows, partial indexes and the views of version 6 hold these
// numbers. A new value is appended, with a migration that widens the checks
// and rewrites the views.
var (
	stateCodes = append(stateCodesV7[:len(stateCodesV7):len(stateCodesV7)], string(queue.Held))
	// stateCodesV7 are the states schema version 7 knew; version 8 added
	// held.
	stateCodesV7 = append(stateCodesV6[:len(stateCodesV6):len(stateCodesV6)], string(queue.Cancelled))
	// stateCodesV6 are the states schema version 6 knew; version 7 added
	// cancelled.
	stateCodesV6 = []string{string(queue.Injected), string(queue.Acknowledged), string(queue.Queued),
		string(queue.Delivering), string(queue.AwaitingAck), string(queue.Failed)}
	ackModeCodes    = []string{string(ackmode.Injected), string(ackmode.Acknowledged)}
	senderKindCodes = []string{string(queue.FromWorker), string(queue.FromOperator), string(queue.FromCoordination), string(queue.FromReplay)}
)

// codeIn is the code of s, or -1 (which the table's CHECK refuses, and
// which matches no row).
func codeIn(codes []string, s string) int {
	for i, c := range codes {
		if c == s {
			return i
		}
	}
	return -1
}

// stateLit is a state's code as an SQL literal. Queries name states as
// literals (see sqlLit) so SQLite can use the partial indexes written with
// the same literals.
func stateLit(s queue.State) string { return strconv.Itoa(codeIn(stateCodes, string(s))) }

// stateIn is a list of states' codes for an SQL IN: "(0, 1)".
func stateIn(ss ...queue.State) string {
	lits := make([]string, len(ss))
	for i, s := range ss {
		lits[i] = stateLit(s)
	}
	return "(" + strings.Join(lits, ", ") + ")"
}

// decodeCode reads a stored code back as its text.
func decodeCode(codes []string, column string, n int64) (string, error) {
	if n < 0 || n >= int64(len(codes)) {
		return "", errs.New(errs.Internal, "a message's %s holds %d, which no code has", column, n)
	}
	return codes[n], nil
}

// caseSQL reads a code column back as its text, in SQL.
func caseSQL(codes []string, col string) string {
	var b strings.Builder
	b.WriteString("CASE " + col)
	for i, c := range codes {
		fmt.Fprintf(&b, " WHEN %d THEN '%s'", i, c)
	}
	return b.String() + " END"
}

// codeSQL is a text expression's code, NULL for a text without one.
func codeSQL(codes []string, expr string) string {
	var b strings.Builder
	b.WriteString("CASE " + expr)
	for i, c := range codes {
		fmt.Fprintf(&b, " WHEN '%s' THEN %d", c, i)
	}
	return b.String() + " END"
}

// textSQL reads a message_texts code column back as its text.
func textSQL(col string) string { return `(SELECT text FROM message_texts WHERE code = ` + col + `)` }

// textCodeSQL is the code of a text expression in message_texts.
func textCodeSQL(expr string) string {
	return `(SELECT code FROM message_texts WHERE text = ` + expr + `)`
}

// idValue stores a message id (and a batch id, a replay's original) as a
// receipt's subject is stored: a canonical UUID as its 16 bytes, any other
// text as itself. The receipts view joins the two as they are.
func idValue(id string) any { return subjectValue(id) }

// msgID scans a stored id back into its text; NULL is "".
type msgID string

func (d *msgID) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d = ""
	case string:
		*d = msgID(v)
	case []byte:
		u, err := uuid.FromBytes(v)
		if err != nil {
			return errs.Wrap(errs.Internal, err, "read a message id")
		}
		*d = msgID(u.String())
	default:
		return errs.New(errs.Internal, "a message id of type %T", src)
	}
	return nil
}

// lastCode is the highest code of a list, for the table's CHECK.
func lastCode(codes []string) string { return strconv.Itoa(len(codes) - 1) }

// schemaV6Tables store a message in about two thirds of the bytes version 5
// took: the ids are 16-byte UUIDs (batch_id is NULL when the message is its
// own batch, as every send is), the states, ack modes and sender kinds are
// codes (stateCodes...), and the repo names, policy profile and
// configuration version, which repeat across messages, are codes of
// message_texts. Column order and meaning are otherwise version 5's. The
// view messages reads every row back as the table of version 5 held it,
// and takes inserts in that form too (messagesInsertTrigger).
func schemaV6Tables() string {
	stateCodes := stateCodesV6 // as version 6 wrote it
	return `
CREATE TABLE message_texts (
	code INTEGER PRIMARY KEY,
	text TEXT NOT NULL UNIQUE
) STRICT;

CREATE TABLE message_rows (
	id               ANY NOT NULL,              -- a UUID as its 16 bytes, any other id as text
	batch_id         ANY,                       -- as id; NULL: the message is its own batch
	endpoint_id      TEXT REFERENCES endpoints(id),
	coordination_endpoint_id TEXT,
	sender           INTEGER NOT NULL,          -- a message_texts code
	sender_kind      INTEGER NOT NULL CHECK (sender_kind BETWEEN 0 AND ` + lastCode(senderKindCodes) + `),
	target_repo      INTEGER NOT NULL,          -- a message_texts code
	body             TEXT NOT NULL CHECK (length(CAST(body AS BLOB)) <= 8192),
	ack_mode         INTEGER NOT NULL CHECK (ack_mode BETWEEN 0 AND ` + lastCode(ackModeCodes) + `),
	state            INTEGER NOT NULL CHECK (state BETWEEN 0 AND ` + lastCode(stateCodes) + `),
	attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 0 AND 9),
	idempotency_key  TEXT,
	request_hash     TEXT,
	correlation_id   TEXT,
	replay_of        ANY,                       -- as id
	policy_profile   INTEGER NOT NULL,          -- a message_texts code
	config_version   INTEGER NOT NULL,          -- a message_texts code
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	next_attempt_at  INTEGER,
	ack_deadline_at  INTEGER,
	injected_at      INTEGER,
	acked_at         INTEGER,
	failed_at        INTEGER,
	last_error       TEXT,
	replay_endpoint_id TEXT
) STRICT;
`
}

// messageIDIndex finds a message by id; leases refer to it.
const messageIDIndex = `CREATE UNIQUE INDEX messages_id ON message_rows(id);`

// schemaV6Leases are version 5's leases, naming their message as
// message_rows stores its id.
const schemaV6Leases = `
CREATE TABLE delivery_leases (
	message_id  ANY PRIMARY KEY REFERENCES message_rows(id),
	lease_id    TEXT NOT NULL UNIQUE,
	attempt     INTEGER NOT NULL CHECK (attempt >= 1),
	holder      TEXT NOT NULL,
	acquired_at INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX delivery_leases_expiry ON delivery_leases(expires_at);
`

// schemaV6Indexes are version 5's message indexes on message_rows, each
// entry smaller by the codes and the 16-byte id.
func schemaV6Indexes() string {
	return `
CREATE UNIQUE INDEX messages_idempotency_key ON message_rows(idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX messages_replay ON message_rows(replay_of, replay_endpoint_id) WHERE replay_of IS NOT NULL;
CREATE INDEX messages_queue ON message_rows(endpoint_id, target_repo, created_at, id) WHERE state = ` + stateLit(queue.Queued) + `;
CREATE INDEX messages_state ON message_rows(state);
CREATE INDEX messages_ack_deadline ON message_rows(ack_deadline_at) WHERE state = ` + stateLit(queue.AwaitingAck) + `;
CREATE INDEX messages_created ON message_rows(created_at);
CREATE INDEX messages_sender ON message_rows(sender, created_at);
CREATE INDEX messages_target ON message_rows(target_repo, created_at);
CREATE INDEX messages_batch ON message_rows(batch_id) WHERE batch_id IS NOT NULL;
`
}

// messagesView reads message_rows back in the columns and values of the
// version 5 table, with the state codes of its version.
func messagesView(stateCodes []string) string {
	return `
CREATE VIEW messages AS SELECT ` + subjectTextSQL("id") + ` AS id,
	` + subjectTextSQL("COALESCE(batch_id, id)") + ` AS batch_id, endpoint_id, coordination_endpoint_id,
	` + textSQL("sender") + ` AS sender, ` + caseSQL(senderKindCodes, "sender_kind") + ` AS sender_kind,
	` + textSQL("target_repo") + ` AS target_repo, body, ` + caseSQL(ackModeCodes, "ack_mode") + ` AS ack_mode,
	` + caseSQL(stateCodes, "state") + ` AS state, attempts, max_attempts, idempotency_key, request_hash, correlation_id,
	` + subjectTextSQL("replay_of") + ` AS replay_of, ` + textSQL("policy_profile") + ` AS policy_profile,
	` + textSQL("config_version") + ` AS config_version, created_at, updated_at, next_attempt_at, ack_deadline_at,
	injected_at, acked_at, failed_at, last_error, replay_endpoint_id
FROM message_rows;
`
}

// messagesInsertTrigger lets a row be inserted into the view messages as
// into the table of version 5 (a hand-made or test row), encoded as the
// store encodes it. The store itself writes message_rows.
func messagesInsertTrigger(stateCodes []string) string {
	return `
CREATE TRIGGER messages_insert INSTEAD OF INSERT ON messages BEGIN
	INSERT OR IGNORE INTO message_texts (text) VALUES (NEW.sender), (NEW.target_repo), (NEW.policy_profile), (NEW.config_version);
	INSERT INTO message_rows (` + messageRowColumns + `)
	VALUES (` + messageRowValues("NEW.", stateCodes) + `);
END;
`
}

// messageRowColumns are message_rows' columns in the order of the version
// 5 table.
const messageRowColumns = `id, batch_id, endpoint_id, coordination_endpoint_id, sender, sender_kind, target_repo, body,
	ack_mode, state, attempts, max_attempts, idempotency_key, request_hash, correlation_id, replay_of,
	policy_profile, config_version, created_at, updated_at, next_attempt_at, ack_deadline_at, injected_at,
	acked_at, failed_at, last_error, replay_endpoint_id`

// messageRowValues encodes the columns of a version 5 row (p is "NEW." or
// a table alias with its dot) as messageRowColumns stores them; the texts
// must be in message_texts already.
func messageRowValues(p string, stateCodes []string) string {
	return subjectSQL(p+"id") + `, CASE WHEN ` + p + `batch_id = ` + p + `id THEN NULL ELSE ` + subjectSQL(p+"batch_id") + ` END,
	` + p + `endpoint_id, ` + p + `coordination_endpoint_id, ` + textCodeSQL(p+"sender") + `, ` + codeSQL(senderKindCodes, p+"sender_kind") + `,
	` + textCodeSQL(p+"target_repo") + `, ` + p + `body, ` + codeSQL(ackModeCodes, p+"ack_mode") + `, ` + codeSQL(stateCodes, p+"state") + `,
	COALESCE(` + p + `attempts, 0), ` + p + `max_attempts, ` + p + `idempotency_key, ` + p + `request_hash, ` + p + `correlation_id,
	` + subjectSQL(p+"replay_of") + `, ` + textCodeSQL(p+"policy_profile") + `, ` + textCodeSQL(p+"config_version") + `,
	` + p + `created_at, ` + p + `updated_at, ` + p + `next_attempt_at, ` + p + `ack_deadline_at, ` + p + `injected_at,
	` + p + `acked_at, ` + p + `failed_at, ` + p + `last_error, ` + p + `replay_endpoint_id`
}

// receiptsViewV6 is version 5's receipts view reading the message of a
// transition from message_rows: joined on the id as both store it.
func receiptsViewV6() string {
	return `
CREATE VIEW receipts AS SELECT r.id AS id, r.at AS at, ` + codeTextSQL("r.kind") + ` AS kind,
	` + subjectTextSQL("r.subject") + ` AS subject_id,
	` + codeTextSQL("r.status") + ` AS status, ` + codeTextSQL("r.reason") + ` AS reason,
	r.attempt AS attempt, r.next_retry_at AS next_retry_at, r.endpoint_id AS endpoint_id,
	r.coordination_endpoint_id AS coordination_endpoint_id,
	CASE WHEN r.of_message THEN NULLIF(` + textSQL("m.policy_profile") + `, '') ELSE r.policy_profile END AS policy_profile,
	CASE WHEN r.of_message THEN NULLIF(` + textSQL("m.config_version") + `, '') ELSE r.config_version END AS config_version,
	CASE WHEN r.of_message THEN json_patch(json_patch('{}', json_object('ack_mode', ` + caseSQL(ackModeCodes, "m.ack_mode") + `,
		'from', (SELECT text FROM receipt_codes WHERE code = r.from_state), 'sender_kind', ` + caseSQL(senderKindCodes, "m.sender_kind") + `,
		'target', ` + textSQL("m.target_repo") + `, 'to', ` + codeTextSQL("r.status") + `)), COALESCE(r.detail, '{}'))
	ELSE r.detail END AS detail,
	r.at + r.projected_after AS projected_at
FROM receipt_rows r LEFT JOIN message_rows m ON r.of_message AND m.id = r.subject;
`
}

// migrateV6 converts every message of version 5 in place, in the
// migration's transaction, and the leases that name them. Row ids are
// kept, so the storage order (export's order) stays as it was.
func migrateV6(tx *sql.Tx) error {
	steps := []string{
		// The views read the tables replaced here.
		`DROP VIEW receipts`,
		schemaV6Tables(),
		`INSERT INTO message_texts (text) SELECT sender FROM messages UNION SELECT target_repo FROM messages
			UNION SELECT policy_profile FROM messages UNION SELECT config_version FROM messages`,
		`INSERT INTO message_rows (rowid, ` + messageRowColumns + `)
			SELECT m.rowid, ` + messageRowValues("m.", stateCodesV6) + ` FROM messages m ORDER BY m.rowid`,
		messageIDIndex,
		`ALTER TABLE delivery_leases RENAME TO delivery_leases_v5`,
		`DROP INDEX delivery_leases_expiry`,
		schemaV6Leases,
		`INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
			SELECT ` + subjectSQL("message_id") + `, lease_id, attempt, holder, acquired_at, expires_at FROM delivery_leases_v5`,
		// The leases first: they refer to messages.
		`DROP TABLE delivery_leases_v5`,
		`DROP TABLE messages`,
		schemaV6Indexes(),
		messagesView(stateCodesV6),
		messagesInsertTrigger(stateCodesV6),
		receiptsViewV6(),
	}
	for _, q := range steps {
		if _, err := tx.Exec(q); err != nil {
			return err
		}
	}
	return nil
}

// migrateV7 adds the state cancelled (code 6): a wake whose lease ended
// before it was written.
func migrateV7(tx *sql.Tx) error { return widenStates(tx, stateCodesV6, stateCodesV7) }

// migrateV8 adds the state held (code 7): a paste whose Enter was held back.
func migrateV8(tx *sql.Tx) error { return widenStates(tx, stateCodesV7, stateCodes) }

// widenStates adds states to the message table, from the codes before to
// the codes after (the same, with more at the end). The table keeps its
// rows as they are; only its CHECK on state is widened, by the procedure
// SQLite documents for changing a constraint every existing row still meets
// (editing the table's definition in sqlite_schema under writable_schema and
// bumping schema_version), so no row is copied. The views that spell states
// are made again with the new codes.
func widenStates(tx *sql.Tx, before, after []string) error {
	var version int
	if err := tx.QueryRow(`PRAGMA schema_version`).Scan(&version); err != nil {
		return err
	}
	old := `CHECK (state BETWEEN 0 AND ` + lastCode(before) + `)`
	widened := `CHECK (state BETWEEN 0 AND ` + lastCode(after) + `)`
	steps := []string{
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = replace(sql, '` + old + `', '` + widened + `') WHERE type = 'table' AND name = 'message_rows'`,
		`PRAGMA schema_version = ` + strconv.Itoa(version+1),
		`PRAGMA writable_schema = OFF`,
		`DROP VIEW receipts`,
		`DROP TRIGGER messages_insert`,
		`DROP VIEW messages`,
		messagesView(after),
		messagesInsertTrigger(after),
		receiptsViewV6(),
	}
	for _, q := range steps {
		if _, err := tx.Exec(q); err != nil {
			return err
		}
	}
	var ddl string
	if err := tx.QueryRow(`SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'message_rows'`).Scan(&ddl); err != nil {
		return err
	}
	if !strings.Contains(ddl, widened) {
		return errs.New(errs.Storage, "the message table's definition does not hold %q after the migration", widened)
	}
	return nil
}
