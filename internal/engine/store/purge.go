package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Purged counts what a purge deleted (or, in a dry run, would delete).
type Purged struct {
	Receipts    int `json:"receipts"`
	Checkpoints int `json:"checkpoints"`
	Leases      int `json:"leases"`
	Triggers    int `json:"triggers"`
	// TriggerKeys are the deleted triggers, their source, source id and
	// revision and target repo only (what makes a trigger's key): the
	// engine forgets what it remembers of them in memory too.
	TriggerKeys []lease.Trigger `json:"-"`
}

// Total is everything counted.
func (p Purged) Total() int { return p.Receipts + p.Checkpoints + p.Leases + p.Triggers }

// The purge's statements, each of rows older than the cutoff (?1) only.
// What goes is history nothing decides by any more:
//   - receipts State Hub has (published); unpublished ones wait to be sent;
//   - leases that ended (completed, stopped), with their checkpoints;
//   - triggers in a final state with no lease left, and a newer trigger of
//     the same source: the newest trigger of each task or message stays, so
//     a revision seen again is still the trigger it was (blocked stays
//     blocked, done is not woken again).
var purgeStatements = []struct {
	delete string
	field  func(*Purged) *int
}{
	{`DELETE FROM receipts WHERE projected_at IS NOT NULL AND at < ?1`, func(p *Purged) *int { return &p.Receipts }},
	{`DELETE FROM checkpoints WHERE lease_id IN (SELECT lease_id FROM leases WHERE state IN ('completed', 'stopped') AND updated_at < ?1)`,
		func(p *Purged) *int { return &p.Checkpoints }},
	{`DELETE FROM leases WHERE state IN ('completed', 'stopped') AND updated_at < ?1`, func(p *Purged) *int { return &p.Leases }},
}

// purgeTriggers is the last statement, after the leases' (a trigger goes
// only once no lease is left of it); it returns the keys of what it
// deleted.
const purgeTriggers = `DELETE FROM triggers AS t WHERE ` + oldTrigger + `
	RETURNING source, source_id, source_revision, target_repo`

const oldTrigger = `t.state IN ('completed', 'stopped', 'superseded') AND t.updated_at < ?1
	AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.trigger_id = t.id)
	AND EXISTS (SELECT 1 FROM triggers n WHERE n.source = t.source AND n.source_id = t.source_id AND n.observed_at > t.observed_at)`

// errDryRun rolls a dry run's transaction back; it carries a code, so
// WriteTx returns it unchanged.
var errDryRun = errs.New(errs.Internal, "dry run: rolled back")

// Purge deletes the history older than before (see purgeStatements) in
// one transaction, or with dryRun only counts it.
func (s *History) Purge(ctx context.Context, before time.Time, dryRun bool) (Purged, error) {
	var out Purged
	cutoff := sqlitedb.Millis(before)
	if dryRun {
		// A dry run deletes in a transaction it rolls back: the counts are
		// exactly what a purge would delete now.
		err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
			if err := s.purgeIn(tx, cutoff, &out); err != nil {
				return err
			}
			return errDryRun
		})
		if errors.Is(err, errDryRun) {
			err = nil
		}
		return out, err
	}
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error { return s.purgeIn(tx, cutoff, &out) })
	return out, err
}

func (s *History) purgeIn(tx *sql.Tx, cutoff int64, out *Purged) error {
	for _, st := range purgeStatements {
		res, err := s.DB.TxExec(tx, st.delete, cutoff)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		*st.field(out) = int(n)
	}
	rows, err := s.DB.TxQuery(tx, purgeTriggers, cutoff)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var t lease.Trigger
		var source string
		if err := rows.Scan(&source, &t.SourceID, &t.SourceRevision, &t.TargetRepo); err != nil {
			return err
		}
		t.Source = lease.Source(source)
		out.TriggerKeys = append(out.TriggerKeys, t)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	out.Triggers = len(out.TriggerKeys)
	return nil
}
