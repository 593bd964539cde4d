package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
)

// LiveLeasesOfRepo lists the live leases for repo, oldest first: a repo's
// agent works on one at a time.
func (s *LeaseLists) LiveLeasesOfRepo(ctx context.Context, repo string) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE target_repo = ? AND state NOT IN ('completed', 'stopped') ORDER BY rowid`, repo))
	return ls, storageErr(err, "read the live leases of "+repo)
}

// Lease reads one lease.
func (s *LeaseLists) Lease(ctx context.Context, id string) (lease.Lease, error) {
	l, err := scanLease(s.DB.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE lease_id = ?`, id))
	return l, storageErr(leaseMissing(err, id), "read lease "+id)
}

// List lists leases newest first, of one state ("" for all), at most
// limit (0: all), skipping the first offset (the next page of a listing).
func (s *LeaseLists) List(ctx context.Context, state string, limit, offset int) ([]lease.Lease, error) {
	if state != "" && !slices.Contains(lease.States, lease.State(state)) {
		return nil, errs.New(errs.BadRequest, "unknown lease state %q", state)
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE ?1 = '' OR state = ?1 ORDER BY rowid DESC LIMIT ?2 OFFSET ?3`, state, limit, offset))
	return ls, storageErr(err, "read leases")
}

// LeaseCounts counts leases by state; every state is present.
func (s *LeaseLists) LeaseCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, st := range lease.States {
		out[string(st)] = 0
	}
	rows, err := s.DB.Query(ctx, `SELECT state, count(*) FROM leases GROUP BY state`)
	if err != nil {
		return out, storageErr(err, "count leases")
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return out, storageErr(err, "count leases")
		}
		out[state] = n
	}
	return out, storageErr(rows.Err(), "count leases")
}

// LiveLeaseOfTask is the live lease of any trigger about taskID: a task is
// worked on by one agent at a time, whatever revision woke it.
func (s *LeaseLists) LiveLeaseOfTask(ctx context.Context, taskID string) (lease.Lease, bool, error) {
	l, err := scanLease(s.DB.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE trigger_id IN (SELECT id FROM triggers WHERE task_id = ?) AND state IN `+liveStates+` LIMIT 1`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return lease.Lease{}, false, nil
	}
	return l, err == nil, storageErr(err, "read the live lease of task "+taskID)
}

// LeasesOfTrigger lists a trigger's leases, oldest first.
func (s *LeaseLists) LeasesOfTrigger(ctx context.Context, triggerID string) ([]lease.Lease, error) {
	ls, err := readLeases(s.DB.Query(ctx, `SELECT `+leaseColumns+` FROM leases WHERE trigger_id = ? ORDER BY rowid`, triggerID))
	return ls, storageErr(err, "read the leases of trigger "+triggerID)
}

// TasksOfTriggers maps each of the triggers that is about a task to that
// task: a lease names its trigger, and a person reads it by its task.
func (s *LeaseLists) TasksOfTriggers(ctx context.Context, triggerIDs []string) (map[string]string, error) {
	out := map[string]string{}
	if len(triggerIDs) == 0 {
		return out, nil
	}
	ids, err := json.Marshal(triggerIDs)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "encode trigger ids")
	}
	// One query for a whole listing: the ids travel as one JSON array.
	rows, err := s.DB.Query(ctx, `SELECT id, task_id FROM triggers
		WHERE id IN (SELECT value FROM json_each(?)) AND task_id IS NOT NULL`, string(ids))
	if err != nil {
		return nil, storageErr(err, "read the tasks of leases")
	}
	defer rows.Close()
	for rows.Next() {
		var id, task string
		if err := rows.Scan(&id, &task); err != nil {
			return nil, storageErr(err, "read the tasks of leases")
		}
		out[id] = task
	}
	return out, storageErr(rows.Err(), "read the tasks of leases")
}
