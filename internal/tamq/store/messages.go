package store

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Receipt kinds of the message lifecycle.
const (
	KindTransition = "message.transition"
	KindRejected   = "message.rejected"
	KindAttempt    = "message.attempt"
)

// NewID returns a time-ordered id (UUIDv7), unique across endpoints.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// messageColumns read a message_rows row in scanMessage's order: the
// repeated texts through message_texts, ids and codes decoded in Go. The
// column max_attempts holds MaxRetries: it keeps the config key's name, as
// renaming a column costs a table rebuild on every user's database.
const messageColumns = `id, batch_id, COALESCE(endpoint_id, ''), (SELECT text FROM message_texts WHERE code = sender), sender_kind,
	(SELECT text FROM message_texts WHERE code = target_repo), body, ack_mode, state,
	attempts, max_attempts, COALESCE(idempotency_key, ''), COALESCE(correlation_id, ''), COALESCE(coordination_endpoint_id, ''), replay_of,
	(SELECT text FROM message_texts WHERE code = policy_profile), (SELECT text FROM message_texts WHERE code = config_version),
	created_at, updated_at, COALESCE(next_attempt_at, 0), COALESCE(ack_deadline_at, 0),
	COALESCE(injected_at, 0), COALESCE(acked_at, 0), COALESCE(failed_at, 0), COALESCE(last_error, '')`

type scanner interface{ Scan(...any) error }

func scanMessage(row scanner) (queue.Message, error) {
	var m queue.Message
	var id, batch, replayOf msgID
	var kind, mode, state int64
	var created, updated, next, deadline, injected, acked, failed int64
	err := row.Scan(&id, &batch, &m.EndpointID, &m.Sender, &kind, &m.Target, &m.Body, &mode, &state,
		&m.Attempts, &m.MaxRetries, &m.IdempotencyKey, &m.CorrelationID, &m.CoordinationEndpointID, &replayOf,
		&m.PolicyProfile, &m.ConfigVersion, &created, &updated, &next, &deadline, &injected, &acked, &failed, &m.LastError)
	if err != nil {
		return m, err
	}
	m.ID, m.BatchID, m.ReplayOf = string(id), string(batch), string(replayOf)
	if m.BatchID == "" {
		m.BatchID = m.ID // stored as NULL: its own batch
	}
	var k, md, st string
	if k, err = decodeCode(senderKindCodes, "sender_kind", kind); err != nil {
		return m, err
	}
	if md, err = decodeCode(ackModeCodes, "ack_mode", mode); err != nil {
		return m, err
	}
	if st, err = decodeCode(stateCodes, "state", state); err != nil {
		return m, err
	}
	m.SenderKind, m.AckMode, m.State = queue.SenderKind(k), ackmode.Mode(md), queue.State(st)
	m.CreatedAt, m.UpdatedAt = sqlitedb.FromMillis(created), sqlitedb.FromMillis(updated)
	m.NextAttemptAt, m.AckDeadlineAt = sqlitedb.TimeOrZero(next), sqlitedb.TimeOrZero(deadline)
	m.InjectedAt, m.AckedAt, m.FailedAt = sqlitedb.TimeOrZero(injected), sqlitedb.TimeOrZero(acked), sqlitedb.TimeOrZero(failed)
	return m, nil
}

// Enqueue stores new messages, each with its receipt, in one transaction:
// all of them or, on an error, none.
func (s *Queue) Enqueue(ctx context.Context, msgs []*queue.Message) error {
	now := s.Now()
	return s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		for _, m := range msgs {
			if err := s.enqueueTx(tx, m, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// EnqueueEach stores each of msgs, every one a sender's own request, in one
// transaction: one commit, so one sync of the disk, for all of them, which
// is what lets the queue keep up with many senders. A message the database
// refuses fails alone, its error at its index in failed: the transaction is
// rolled back and run again without it, and the others are stored (a
// savepoint around each message would do the same, at the price of three
// more statements a message on every commit, for a failure that is rare).
// err is the transaction failing as a whole (the disk, the commit): then
// none is stored. Messages are stored in the order given; a failed one
// keeps the id it was given, unused.
func (s *Queue) EnqueueEach(ctx context.Context, msgs []*queue.Message) (failed []error, err error) {
	now := s.Now()
	failed = make([]error, len(msgs))
	for {
		refused := -1
		var refusal error
		err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
			for i, m := range msgs {
				if failed[i] != nil {
					continue
				}
				if err := s.enqueueTx(tx, m, now); err != nil {
					// A failure of the database itself (the disk, a lock)
					// is the batch's: returned whole, and a busy one is
					// retried by WriteTx.
					if errs.CodeOf(err) != errs.Storage {
						refused, refusal = i, err
					}
					return err
				}
			}
			return nil
		})
		if err == nil {
			return failed, nil
		}
		if refused < 0 {
			return nil, err
		}
		failed[refused] = refusal
	}
}

// enqueueTx stores one new message and its receipt inside tx.
func (s *Queue) enqueueTx(tx *sql.Tx, m *queue.Message, now time.Time) error {
	if m.ID == "" {
		m.ID = NewID()
	}
	if m.BatchID == "" {
		m.BatchID = m.ID // a send is a batch of one
	}
	if m.CreatedAt.IsZero() || m.CreatedAt.After(now) {
		m.CreatedAt = now // a given time is when a broker saw the line
	}
	m.State, m.UpdatedAt = queue.Queued, now
	if m.NextAttemptAt.IsZero() {
		m.NextAttemptAt = now
	}
	if _, err := s.insertTx(tx, m, false); err != nil {
		return err
	}
	return s.receipts.insertReceiptTx(tx, transitionReceipt(m, "", "accepted"), m)
}

// insertTx inserts a new message. A replay is inserted only when neither the
// same original nor the same idempotency key is already there (inserted is
// false then); anything else that clashes is an error.
func (s *Queue) insertTx(tx *sql.Tx, m *queue.Message, replay bool) (inserted bool, err error) {
	// The texts many messages repeat are stored once, each row holding
	// their codes.
	if _, err := s.DB.TxExec(tx, `INSERT INTO message_texts (text) VALUES (?), (?), (?), (?) ON CONFLICT DO NOTHING`,
		m.Sender, m.Target, m.PolicyProfile, m.ConfigVersion); err != nil {
		return false, err
	}
	const text = `(SELECT code FROM message_texts WHERE text = ?)`
	q := `INSERT INTO message_rows (id, batch_id, endpoint_id, sender, sender_kind, target_repo, body,
		ack_mode, state, attempts, max_attempts, idempotency_key, correlation_id, coordination_endpoint_id, replay_of,
		replay_endpoint_id, policy_profile, config_version, created_at, updated_at, next_attempt_at, last_error)
		VALUES (?, ?, ?, ` + text + `, ?, ` + text + `, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ` + text + `, ` + text + `, ?, ?, ?, ?)`
	var replayEndpoint, batch any
	if replay {
		q += ` ON CONFLICT DO NOTHING`
		replayEndpoint = sqlitedb.NullString(m.EndpointID)
	}
	if m.BatchID != m.ID {
		batch = idValue(m.BatchID)
	}
	res, err := s.DB.TxExec(tx, q,
		idValue(m.ID), batch, sqlitedb.NullString(m.EndpointID), m.Sender, codeIn(senderKindCodes, string(m.SenderKind)), m.Target, m.Body,
		codeIn(ackModeCodes, string(m.AckMode)), codeIn(stateCodes, string(m.State)), m.MaxRetries, sqlitedb.NullString(m.IdempotencyKey),
		sqlitedb.NullString(m.CorrelationID), sqlitedb.NullString(m.CoordinationEndpointID), idValue(m.ReplayOf), replayEndpoint, m.PolicyProfile, m.ConfigVersion,
		sqlitedb.Millis(m.CreatedAt), sqlitedb.Millis(m.UpdatedAt), sqlitedb.Millis(m.NextAttemptAt), sqlitedb.NullString(m.LastError))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func transitionReceipt(m *queue.Message, from queue.State, reason string) receipt.Receipt {
	detail := map[string]any{"to": string(m.State), "target": m.Target, "sender_kind": string(m.SenderKind), "ack_mode": string(m.AckMode)}
	if from != "" {
		detail["from"] = string(from)
	}
	return receipt.Receipt{
		Kind: KindTransition, SubjectID: m.ID, Status: string(m.State), Reason: reason,
		Attempt: m.Attempts, NextRetryAt: nextRetry(m), EndpointID: m.EndpointID,
		PolicyProfile: m.PolicyProfile, ConfigVersion: m.ConfigVersion, Detail: detail,
	}
}

func nextRetry(m *queue.Message) time.Time {
	if m.State == queue.Queued {
		return m.NextAttemptAt
	}
	return time.Time{}
}

// Get reads one message.
func (s *Deliveries) Get(ctx context.Context, id string) (queue.Message, error) {
	m, err := scanMessage(s.DB.QueryRow(ctx, `SELECT `+messageColumns+` FROM message_rows WHERE id = ?`, idValue(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return m, errs.New(errs.NotFound, "no message %s", id).WithHint("see `tamq history`")
	}
	return m, err
}

// Transition applies change to one message in one transaction, saves it and
// writes its receipt. change returning an error leaves everything as it was.
func (s *Deliveries) Transition(ctx context.Context, id, reason string, change func(*queue.Message) error) (queue.Message, error) {
	return s.TransitionDetail(ctx, id, reason, nil, change)
}

// TransitionDetail is Transition with extra receipt detail (sanitized like
// every receipt detail).
func (s *Deliveries) TransitionDetail(ctx context.Context, id, reason string, detail map[string]any, change func(*queue.Message) error) (queue.Message, error) {
	var out queue.Message
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.transitionTx(tx, id, reason, detail, change)
		return err
	})
	return out, err
}

// TransitionEach applies change to each message of ids (the messages of one
// delivery) in one transaction, each saved with its own receipt as
// Transition would. A message change refuses (it was acknowledged
// meanwhile), or that is gone, is left as it is and its error is in
// failed at its index; the others go on. err is the database failing, and
// then nothing changed.
func (s *Deliveries) TransitionEach(ctx context.Context, ids []string, reason string, detail map[string]any, change func(*queue.Message) error) (failed []error, err error) {
	err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		failed = make([]error, len(ids))
		for i, id := range ids {
			var refused error
			_, err := s.transitionTx(tx, id, reason, detail, func(m *queue.Message) error {
				refused = change(m)
				return refused
			})
			switch {
			case refused != nil || errs.Is(err, errs.NotFound):
				failed[i] = err // nothing of this message was written
			case err != nil:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return failed, nil
}

// transitionTx is one message's transition inside tx.
func (s *Deliveries) transitionTx(tx *sql.Tx, id, reason string, detail map[string]any, change func(*queue.Message) error) (queue.Message, error) {
	m, err := scanMessage(s.DB.TxQueryRow(tx, `SELECT `+messageColumns+` FROM message_rows WHERE id = ?`, idValue(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return m, errs.New(errs.NotFound, "no message %s", id).WithHint("see `tamq history`")
	}
	if err != nil {
		return m, err
	}
	from := m.State
	if err := change(&m); err != nil {
		return m, err
	}
	if err := s.saveTx(tx, &m); err != nil {
		return m, err
	}
	if m.State != queue.Delivering {
		if _, err := s.DB.TxExec(tx, `DELETE FROM delivery_leases WHERE message_id = ?`, idValue(m.ID)); err != nil {
			return m, err
		}
	}
	if from != m.State {
		r := transitionReceipt(&m, from, reason)
		maps.Copy(r.Detail, detail)
		if err := s.receipts.insertReceiptTx(tx, r, &m); err != nil {
			return m, err
		}
	}
	return m, nil
}

func (s *Deliveries) saveTx(tx *sql.Tx, m *queue.Message) error {
	_, err := s.DB.TxExec(tx, `UPDATE message_rows SET state = ?, attempts = ?, updated_at = ?, next_attempt_at = ?, ack_deadline_at = ?,
		injected_at = ?, acked_at = ?, failed_at = ?, last_error = ?, endpoint_id = ? WHERE id = ?`,
		codeIn(stateCodes, string(m.State)), m.Attempts, sqlitedb.Millis(m.UpdatedAt), sqlitedb.NullMillis(m.NextAttemptAt), sqlitedb.NullMillis(m.AckDeadlineAt),
		sqlitedb.NullMillis(m.InjectedAt), sqlitedb.NullMillis(m.AckedAt), sqlitedb.NullMillis(m.FailedAt), sqlitedb.NullString(m.LastError), sqlitedb.NullString(m.EndpointID), idValue(m.ID))
	return err
}

// Target is a window's queue: messages for one repo on one endpoint.
type Target struct {
	EndpointID string
	Repo       string
	// NextAt is when its oldest queued message is due.
	NextAt time.Time
}

// Key names the one writer slot of the target's window.
func (t Target) Key() string { return DeliveryKey(t.EndpointID, t.Repo) }

// QueuedTargets lists every target with queued messages and when the first is
// due, in one grouped read (the dispatcher's view of the queue).
func (s *Deliveries) QueuedTargets(ctx context.Context) ([]Target, error) {
	// Driven by the windows, each probe an index lookup of the queue's head:
	// the cost follows the number of windows, not the length of the queue.
	rows, err := s.DB.Query(ctx, `SELECT w.endpoint_id, w.repo, (SELECT m.next_attempt_at FROM message_rows m
		WHERE m.state = `+stateLit(queue.Queued)+` AND m.endpoint_id = w.endpoint_id
		AND m.target_repo = (SELECT code FROM message_texts WHERE text = w.repo)
		ORDER BY m.created_at, m.id LIMIT 1) AS next
		FROM windows w WHERE next IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Target
	for rows.Next() {
		var t Target
		var next int64
		if err := rows.Scan(&t.EndpointID, &t.Repo, &next); err != nil {
			return nil, err
		}
		t.NextAt = sqlitedb.FromMillis(next)
		out = append(out, t)
	}
	return out, rows.Err()
}

// Claim takes the head of a target's queue (its oldest queued message: one
// window gets its messages in the order they were sent, and a message waiting
// out a backoff holds back the ones behind it) when it is due, moving it to
// delivering under a delivery lease that expires at now+ttl; ok is false when
// it is not due. A claim that outlives its holder is found by ExpiredLeases and
// delivered again with the same id.
func (s *Deliveries) Claim(ctx context.Context, holder string, ttl time.Duration, t Target) (m queue.Message, ok bool, err error) {
	ms, err := s.ClaimBatch(ctx, holder, ttl, t, 1)
	if err != nil || len(ms) == 0 {
		return queue.Message{}, false, err
	}
	return ms[0], true, nil
}

// ClaimBatch is Claim for the messages one delivery takes (queue.Batch, at
// most limit): the head of the target's queue and the ones behind it that
// may share its paste, all claimed in one transaction, each under its own
// lease and with its own receipt, as if claimed alone. None when the head is
// not due.
func (s *Deliveries) ClaimBatch(ctx context.Context, holder string, ttl time.Duration, t Target, limit int) ([]queue.Message, error) {
	now := s.Now()
	var out []queue.Message
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		out = nil
		queued, err := readMessages(s.DB.TxQuery(tx, `SELECT `+messageColumns+` FROM message_rows
			WHERE state = `+stateLit(queue.Queued)+` AND endpoint_id = ? AND target_repo = (SELECT code FROM message_texts WHERE text = ?)
			ORDER BY created_at, id LIMIT ?`, t.EndpointID, t.Repo, max(limit, 1)))
		if err != nil {
			return err
		}
		for _, m := range queued[:queue.Batch(queued, now, limit)] {
			if err := m.Claim(now); err != nil {
				return err
			}
			if err := s.saveTx(tx, &m); err != nil {
				return err
			}
			if _, err := s.DB.TxExec(tx, `INSERT INTO delivery_leases (message_id, lease_id, attempt, holder, acquired_at, expires_at)
				VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (message_id) DO UPDATE SET lease_id = excluded.lease_id, attempt = excluded.attempt,
				holder = excluded.holder, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`,
				idValue(m.ID), NewID(), m.Attempts, holder, sqlitedb.Millis(now), sqlitedb.Millis(now.Add(ttl))); err != nil {
				return err
			}
			if err := s.receipts.insertReceiptTx(tx, transitionReceipt(&m, queue.Queued, "claimed for delivery"), &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeliveryKey names the one writer slot of a target window.
func DeliveryKey(endpointID, target string) string { return endpointID + "\x00" + target }

// ExpiredLeases lists delivering messages whose lease has expired (or that
// have no lease: a crash between claim and lease cannot happen, but a
// restart finds every earlier holder's claims dead).
func (s *Deliveries) ExpiredLeases(ctx context.Context, holder string) ([]string, error) {
	return s.ids(ctx, `SELECT m.id FROM message_rows m LEFT JOIN delivery_leases l ON l.message_id = m.id
		WHERE m.state = `+stateLit(queue.Delivering)+` AND (l.expires_at IS NULL OR l.expires_at <= ? OR l.holder <> ?)`, sqlitedb.Millis(s.Now()), holder)
}

// Interruption is a claim for delivery that an earlier run of the service
// made and never finished: the message, still delivering, and when it was
// claimed (one time for the messages of one delivery).
type Interruption struct {
	Message   queue.Message
	ClaimedAt time.Time
}

// Interrupted lists the claims ExpiredLeases finds, oldest message first,
// with the time each was claimed.
func (s *Deliveries) Interrupted(ctx context.Context, holder string) ([]Interruption, error) {
	rows, err := s.DB.Query(ctx, `SELECT `+messageColumns+`, COALESCE(l.acquired_at, 0)
		FROM message_rows m LEFT JOIN delivery_leases l ON l.message_id = m.id
		WHERE m.state = `+stateLit(queue.Delivering)+` AND (l.expires_at IS NULL OR l.expires_at <= ? OR l.holder <> ?)
		ORDER BY m.created_at, m.id`, sqlitedb.Millis(s.Now()), holder)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Interruption
	for rows.Next() {
		var claimed int64
		m, err := scanMessage(scanTail{rows, []any{&claimed}})
		if err != nil {
			return nil, err
		}
		out = append(out, Interruption{Message: m, ClaimedAt: sqlitedb.FromMillis(claimed)})
	}
	return out, rows.Err()
}

// scanTail scans a row of a message's columns followed by tail's.
type scanTail struct {
	row  scanner
	tail []any
}

func (s scanTail) Scan(dest ...any) error { return s.row.Scan(append(dest, s.tail...)...) }

// DueAcks lists messages whose ack deadline has passed.
func (s *Deliveries) DueAcks(ctx context.Context) ([]string, error) {
	return s.ids(ctx, `SELECT id FROM message_rows WHERE state = `+stateLit(queue.AwaitingAck)+` AND ack_deadline_at <= ?`, sqlitedb.Millis(s.Now()))
}

func (s *Deliveries) ids(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.DB.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id msgID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, string(id))
	}
	return out, rows.Err()
}

// NextAckDeadline is the earliest ack deadline, zero when none waits.
func (s *Deliveries) NextAckDeadline(ctx context.Context) (time.Time, error) {
	var v sql.NullInt64
	err := s.DB.QueryRow(ctx, `SELECT min(ack_deadline_at) FROM message_rows WHERE state = `+stateLit(queue.AwaitingAck)).Scan(&v)
	if err != nil || !v.Valid {
		return time.Time{}, err
	}
	return sqlitedb.FromMillis(v.Int64), nil
}

// NoteWaiting records on the queued messages of a window why they wait (its
// agent exited, its window closed, it shows a dialog), with one receipt for
// the window, so history and status say it.
func (s *Deliveries) NoteWaiting(ctx context.Context, endpointID, repo, reason string) error {
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		// The queue index, not the state index SQLite would pick: it holds the
		// window's queued messages and nothing else.
		res, err := s.DB.TxExec(tx, `UPDATE message_rows INDEXED BY messages_queue SET last_error = ?, updated_at = ?
			WHERE state = `+stateLit(queue.Queued)+` AND endpoint_id = ?
			AND target_repo = (SELECT code FROM message_texts WHERE text = ?) AND COALESCE(last_error, '') <> ?`,
			reason, sqlitedb.Millis(s.Now()), endpointID, repo, reason)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		return s.receipts.AddReceiptTx(tx, receipt.Receipt{Kind: "window.waiting", SubjectID: repo, Status: "waiting",
			Reason: reason, EndpointID: endpointID, Detail: map[string]any{"repo": repo, "messages": n}})
	})
	return storageErr(err, "note why messages for "+repo+" wait")
}

// readMessages reads the messages a query returns (rows and err as the
// query returned them) and closes the rows.
func readMessages[R interface {
	scanner
	Next() bool
	Err() error
	Close() error
}](rows R, err error) ([]queue.Message, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queue.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
