package store

import (
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// receiptCodes are the texts a receipt row stores as a small integer (its
// index here) in place of the text: kinds, states and the usual reasons.
// Schema version 5 wrote them into receipt_codes, which the receipts view
// reads them back from. Append only, and only with a migration that adds the
// new ones to receipt_codes: a code never changes meaning. A text without a
// code is stored as text.
var receiptCodes = []string{
	// kinds
	KindTransition, KindRejected, KindAttempt, KindPurged, "history.replayed",
	receipt.KindServiceStart, receipt.KindServiceShutdown, receipt.KindAuthRefused,
	"endpoint.register", "endpoint.state", "endpoint.rebind", "endpoint.forget", "window.waiting",
	// states and statuses
	string(queue.Queued), string(queue.Delivering), string(queue.Injected), string(queue.AwaitingAck),
	string(queue.Acknowledged), string(queue.Failed), string(queue.Connected), string(queue.Disconnected),
	"waiting", "purged", "replayed", "refused", "rejected", "started", "stopped",
	// reasons
	"accepted", "claimed for delivery", "written to terminal", "write failed", "ack deadline passed",
	"retry requested", "delivery interrupted; redelivering", "superseded by a newer attempt of its lease",
}

// Built on first use, as the other tables here: every tamq command loads
// this package, and most never write or read a receipt.
var codeOf = sync.OnceValue(func() map[string]int {
	m := make(map[string]int, len(receiptCodes))
	for i, t := range receiptCodes {
		m[t] = i
	}
	return m
})

// coded is a text as a receipt row stores it: its code, or itself.
func coded(s string) any {
	if c, ok := codeOf()[s]; ok {
		return c
	}
	return s
}

// subjectValue stores a UUID subject (a message, a purge) as its 16 bytes,
// when the text is exactly the canonical form that reads back the same;
// any other subject is stored as text.
func subjectValue(s string) any {
	if s == "" {
		return nil
	}
	if u, err := uuid.Parse(s); err == nil && u.String() == s {
		return u[:]
	}
	return s
}

// canonicalUUID matches the lowercase 8-4-4-4-12 text subjectValue packs.
var canonicalUUID = sync.OnceValue(func() string {
	hex := func(n int) string { return strings.Repeat("[0-9a-f]", n) }
	return hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12)
})

// subjectSQL is subjectValue in SQL, for a text expression.
func subjectSQL(expr string) string {
	return `CASE WHEN ` + expr + ` GLOB '` + canonicalUUID() + `' THEN unhex(replace(` + expr + `, '-', '')) ELSE ` + expr + ` END`
}

// subjectTextSQL reads a stored subject back as text.
func subjectTextSQL(col string) string {
	h := `hex(` + col + `)`
	return `CASE WHEN typeof(` + col + `) = 'blob' THEN lower(substr(` + h + `, 1, 8) || '-' || substr(` + h + `, 9, 4) || '-' ||
		substr(` + h + `, 13, 4) || '-' || substr(` + h + `, 17, 4) || '-' || substr(` + h + `, 21)) ELSE ` + col + ` END`
}

// codeTextSQL reads a stored code (or text) back as text.
func codeTextSQL(col string) string {
	return `CASE WHEN typeof(` + col + `) = 'integer' THEN (SELECT text FROM receipt_codes WHERE code = ` + col + `) ELSE ` + col + ` END`
}

// messageKinds are the codes of the message.* kinds: receipts about one
// message, which go with it when it is purged.
var messageKinds = sync.OnceValue(func() string {
	var cs []string
	for i, t := range receiptCodes {
		if strings.HasPrefix(t, "message.") {
			cs = append(cs, strconv.Itoa(i))
		}
	}
	return "(" + strings.Join(cs, ", ") + ")"
})

// transitionFields are the detail keys of a transition receipt that the
// message row or the receipt's own status already hold.
var transitionFields = []string{"to", "target", "sender_kind", "ack_mode"}

// receiptRow is a receipt as receipt_rows stores it.
type receiptRow struct {
	kind, subject, status, reason, from any
	endpoint, coordination              any
	policy, config, detail              any
	ofMessage                           any
}

// encodeReceipt maps a receipt (defaults applied) to its row. m, when given,
// is the message the receipt is a transition of, as saved in the same
// transaction: what the receipt repeats of it (target, sender kind, ack mode,
// policy profile, configuration version) is left out, and the receipts view
// reads it from the message row. A message row never changes those.
func encodeReceipt(r receipt.Receipt, m *queue.Message) (receiptRow, error) {
	row := receiptRow{
		kind: coded(r.Kind), subject: subjectValue(r.SubjectID), status: coded(r.Status), reason: nil,
		endpoint: sqlitedb.NullString(r.EndpointID), coordination: sqlitedb.NullString(r.CoordinationEndpointID),
		policy: sqlitedb.NullString(r.PolicyProfile), config: sqlitedb.NullString(r.ConfigVersion),
	}
	if r.Reason != "" {
		row.reason = coded(r.Reason)
	}
	if len(r.Detail) == 0 {
		return row, nil
	}
	detail := receipt.Sanitize(r.Detail)
	if m != nil && repeatsMessage(r, detail, m) {
		row.ofMessage, row.policy, row.config = 1, nil, nil
		for _, k := range transitionFields {
			delete(detail, k)
		}
		if from, ok := detail["from"].(string); ok {
			if c, ok := codeOf()[from]; ok {
				row.from = c
				delete(detail, "from")
			}
		}
		if len(detail) == 0 {
			return row, nil
		}
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return row, errs.Wrap(errs.Internal, err, "encode receipt detail")
	}
	row.detail = string(b)
	return row, nil
}

// repeatsMessage says whether a transition receipt's detail and versions are
// exactly what the message row and its status hold.
func repeatsMessage(r receipt.Receipt, detail map[string]any, m *queue.Message) bool {
	return r.Kind == KindTransition && r.SubjectID == m.ID &&
		r.PolicyProfile == m.PolicyProfile && r.ConfigVersion == m.ConfigVersion &&
		detail["to"] == r.Status && detail["target"] == m.Target &&
		detail["sender_kind"] == string(m.SenderKind) && detail["ack_mode"] == string(m.AckMode)
}

// insertReceiptTx writes one receipt row and returns nothing but the error.
func (s *ReceiptLog) insertReceiptTx(tx *sql.Tx, r receipt.Receipt, m *queue.Message) error {
	r.Stamp(s.Now(), s.PolicyProfile, s.ConfigVersion)
	row, err := encodeReceipt(r, m)
	if err != nil {
		return err
	}
	var attempt any
	if r.Attempt > 0 {
		attempt = r.Attempt
	}
	_, err = s.DB.TxExec(tx, `INSERT INTO receipt_rows (at, kind, subject, status, reason, from_state, attempt, next_retry_at,
		endpoint_id, coordination_endpoint_id, policy_profile, config_version, detail, of_message)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sqlitedb.Millis(r.At), row.kind, row.subject, row.status, row.reason, row.from, attempt, sqlitedb.NullMillis(r.NextRetryAt),
		row.endpoint, row.coordination, row.policy, row.config, row.detail, row.ofMessage)
	if err == nil && s.Added != nil {
		s.Added()
	}
	return err
}
