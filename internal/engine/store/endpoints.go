package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Refusal is a window the engine did not accept at attach, with why.
type Refusal struct {
	Repo   string
	Reason string
}

// endpointKnownTx refuses a coordination endpoint id that was never granted
// (the empty id is no endpoint and passes).
func (s *Endpoints) endpointKnownTx(tx *sql.Tx, id string) error {
	if id == "" {
		return nil
	}
	var n int
	if err := s.DB.TxQueryRow(tx, `SELECT count(*) FROM endpoints WHERE coordination_endpoint_id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errs.New(errs.NotFound, "no coordination endpoint %s", id).WithHint("see `coordination-engine status`")
	}
	return nil
}

// Attach records a tamq endpoint as attached with its windows (replacing
// those recorded before), with a receipt "endpoint.attached" and one
// "endpoint.refused" per refused window (its repo and why: no paths). An
// endpoint seen before with the same tamq endpoint id and tmux socket keeps
// its coordination endpoint id (tamq attaches again after it restarts);
// otherwise it is granted a new one, "ce-<uuid>". A tmux socket serves one
// server at a time, so another endpoint still attached on the same socket
// is gone: it is detached.
func (s *Endpoints) Attach(ctx context.Context, ep lease.Endpoint, refused []Refusal) (lease.Endpoint, error) {
	now := s.Now()
	ep.Windows = slices.Clone(ep.Windows) // modes are filled in below: not in the caller's slice
	seen := map[string]bool{}
	for i, w := range ep.Windows {
		if seen[w.Repo] {
			return ep, errs.New(errs.BadRequest, "endpoint %s lists repo %s twice", ep.TamqEndpointID, w.Repo)
		}
		seen[w.Repo] = true
		if w.Mode == "" {
			ep.Windows[i].Mode = lease.ModeManual // never woken unless it says so
		}
	}
	if ep.Capabilities == nil {
		ep.Capabilities = []string{}
	}
	caps, err := json.Marshal(ep.Capabilities)
	if err != nil {
		return ep, errs.Wrap(errs.Internal, err, "encode capabilities")
	}
	ep.State, ep.AttachedAt, ep.UpdatedAt = lease.Attached, now, now
	var out lease.Endpoint
	err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		ep.ID = ""
		err := s.DB.TxQueryRow(tx, `SELECT coordination_endpoint_id FROM endpoints WHERE tamq_endpoint_id = ? AND tmux_socket IS ?
			ORDER BY updated_at DESC LIMIT 1`, ep.TamqEndpointID, sqlitedb.NullString(ep.TmuxSocket)).Scan(&ep.ID)
		reattached := err == nil
		switch {
		case errors.Is(err, sql.ErrNoRows):
			ep.ID = "ce-" + NewID()
		case err != nil:
			return err
		}
		// tamq attaches again at every refresh of its windows; the receipt
		// says what changed, so one that changes nothing (attached already,
		// the same windows and protocol) writes none: those were most of
		// the engine's receipts and hid the others in top's latest ten.
		same := false
		if reattached {
			if same, err = s.sameAttachTx(tx, ep); err != nil {
				return err
			}
		}
		if _, err := s.DB.TxExec(tx, `INSERT INTO endpoints (coordination_endpoint_id, tamq_endpoint_id, tmux_socket, tmux_session,
			protocol_version, capabilities, state, attached_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (coordination_endpoint_id) DO UPDATE SET tmux_session = excluded.tmux_session,
			protocol_version = excluded.protocol_version, capabilities = excluded.capabilities, state = excluded.state,
			attached_at = excluded.attached_at, updated_at = excluded.updated_at`,
			ep.ID, ep.TamqEndpointID, sqlitedb.NullString(ep.TmuxSocket), sqlitedb.NullString(ep.TmuxSession), ep.Proto, string(caps),
			string(ep.State), sqlitedb.Millis(now), sqlitedb.Millis(now)); err != nil {
			return err
		}
		if ep.TmuxSocket != "" {
			if _, err := s.detachTx(tx, now, "replaced by "+ep.TamqEndpointID,
				`tmux_socket = ? AND coordination_endpoint_id <> ?`, ep.TmuxSocket, ep.ID); err != nil {
				return err
			}
		}
		if _, err := s.DB.TxExec(tx, `DELETE FROM endpoint_repos WHERE coordination_endpoint_id = ?`, ep.ID); err != nil {
			return err
		}
		for _, w := range ep.Windows {
			if _, err := s.DB.TxExec(tx, `INSERT INTO endpoint_repos (coordination_endpoint_id, repo, path, mode, command, no_agent)
				VALUES (?, ?, ?, ?, ?, ?)`, ep.ID, w.Repo, w.Path, string(w.Mode), sqlitedb.NullString(w.Command), w.NoAgent); err != nil {
				return err
			}
		}
		if same {
			// nothing changed: no endpoint.attached
		} else if err := s.receipts.addReceiptTx(tx, receipt.Receipt{At: now, Kind: KindEndpointAttached, Status: string(lease.Attached), CoordinationEndpointID: ep.ID,
			Detail: map[string]any{"tamq_endpoint_id": ep.TamqEndpointID, "windows": len(ep.Windows), "refused": len(refused),
				"proto": ep.Proto, "reattached": reattached}}); err != nil {
			return err
		}
		for _, r := range refused {
			if err := s.receipts.addReceiptTx(tx, receipt.Receipt{At: now, Kind: KindEndpointRefused, Status: "refused", Reason: r.Reason,
				CoordinationEndpointID: ep.ID, Detail: map[string]any{"tamq_endpoint_id": ep.TamqEndpointID, "repo": r.Repo}}); err != nil {
				return err
			}
		}
		out = ep
		return nil
	})
	return out, storageErr(err, "record the attach of endpoint "+ep.TamqEndpointID)
}

// sameAttachTx says whether ep, found under its id, is attached already
// with the same protocol and the same windows (repo, path, mode, command,
// no_agent; in any order).
func (s *Endpoints) sameAttachTx(tx *sql.Tx, ep lease.Endpoint) (bool, error) {
	var state, proto string
	if err := s.DB.TxQueryRow(tx, `SELECT state, protocol_version FROM endpoints WHERE coordination_endpoint_id = ?`, ep.ID).Scan(&state, &proto); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return false, err
	}
	if state != string(lease.Attached) || proto != ep.Proto {
		return false, nil
	}
	rows, err := tx.Query(`SELECT repo, path, mode, coalesce(command, ''), no_agent FROM endpoint_repos WHERE coordination_endpoint_id = ?`, ep.ID)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	want := map[lease.Window]bool{}
	for _, w := range ep.Windows {
		want[w] = true
	}
	n := 0
	for rows.Next() {
		var w lease.Window
		var mode string
		if err := rows.Scan(&w.Repo, &w.Path, &mode, &w.Command, &w.NoAgent); err != nil {
			return false, err
		}
		w.Mode = lease.WindowMode(mode)
		if !want[w] {
			return false, rows.Err()
		}
		n++
	}
	return n == len(ep.Windows), rows.Err()
}

// detachTx detaches the attached endpoints the where clause selects, with a
// receipt each, and returns how many.
func (s *Endpoints) detachTx(tx *sql.Tx, now time.Time, reason, where string, args ...any) (int, error) {
	rows, err := tx.Query(`SELECT coordination_endpoint_id, tamq_endpoint_id FROM endpoints
		WHERE state = 'attached' AND `+where+` ORDER BY rowid`, args...)
	if err != nil {
		return 0, err
	}
	var ids, tamqIDs []string
	for rows.Next() {
		var id, tamqID string
		if err := rows.Scan(&id, &tamqID); err != nil {
			rows.Close()
			return 0, err
		}
		ids, tamqIDs = append(ids, id), append(tamqIDs, tamqID)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for i, id := range ids {
		if _, err := s.DB.TxExec(tx, `UPDATE endpoints SET state = 'detached', updated_at = ? WHERE coordination_endpoint_id = ?`,
			sqlitedb.Millis(now), id); err != nil {
			return 0, err
		}
		if err := s.receipts.addReceiptTx(tx, receipt.Receipt{At: now, Kind: KindEndpointDetached, Status: string(lease.Detached), Reason: reason,
			CoordinationEndpointID: id, Detail: map[string]any{"tamq_endpoint_id": tamqIDs[i]}}); err != nil {
			return 0, err
		}
	}
	return len(ids), nil
}

// Detach records that a tamq endpoint stopped (tamq's service stops, or its
// tmux server is gone). Detaching one already detached changes nothing; one
// never attached is not found.
func (s *Endpoints) Detach(ctx context.Context, tamqEndpointID, reason string) error {
	now := s.Now()
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		var known int
		if err := s.DB.TxQueryRow(tx, `SELECT count(*) FROM endpoints WHERE tamq_endpoint_id = ?`, tamqEndpointID).Scan(&known); err != nil {
			return err
		}
		if known == 0 {
			return errs.New(errs.NotFound, "no endpoint %s has attached", tamqEndpointID).WithHint("see `coordination-engine status`")
		}
		_, err := s.detachTx(tx, now, reason, `tamq_endpoint_id = ?`, tamqEndpointID)
		return err
	})
	return storageErr(err, "record the detach of endpoint "+tamqEndpointID)
}

// DetachAll detaches every attached endpoint (the engine stops, or starts
// after a crash: tamq attaches again) and returns how many were attached.
func (s *Endpoints) DetachAll(ctx context.Context, reason string) (int, error) {
	now := s.Now()
	var n int
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = s.detachTx(tx, now, reason, `1 = 1`)
		return err
	})
	return n, storageErr(err, "detach endpoints")
}

// List lists the endpoints with their windows, the latest attached
// first; attachedOnly leaves the detached out.
func (s *Endpoints) List(ctx context.Context, attachedOnly bool) ([]lease.Endpoint, error) {
	where := `1 = 1`
	if attachedOnly {
		where = `state = 'attached'`
	}
	eps, err := s.endpoints(ctx, where)
	return eps, storageErr(err, "read endpoints")
}

// AnyAttached says whether any tamq endpoint is attached.
func (s *Endpoints) AnyAttached(ctx context.Context) (bool, error) {
	var n int
	err := s.DB.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM endpoints WHERE state = 'attached')`).Scan(&n)
	return n == 1, storageErr(err, "read endpoints")
}

// Hosts lists the attached endpoints that have a window for repo (in any
// mode: the caller decides whether it may wake it), with all their windows.
func (s *Endpoints) Hosts(ctx context.Context, repo string) ([]lease.Endpoint, error) {
	eps, err := s.endpoints(ctx, `state = 'attached' AND coordination_endpoint_id IN
		(SELECT coordination_endpoint_id FROM endpoint_repos WHERE repo = ?)`, repo)
	return eps, storageErr(err, "read the endpoints of "+repo)
}

func (s *Endpoints) endpoints(ctx context.Context, where string, args ...any) ([]lease.Endpoint, error) {
	rows, err := s.DB.Query(ctx, `SELECT coordination_endpoint_id, tamq_endpoint_id, COALESCE(tmux_socket, ''), COALESCE(tmux_session, ''),
		protocol_version, capabilities, state, attached_at, updated_at FROM endpoints WHERE `+where+` ORDER BY attached_at DESC, rowid DESC`, args...)
	if err != nil {
		return nil, err
	}
	var out []lease.Endpoint
	for rows.Next() {
		var ep lease.Endpoint
		var caps, state string
		var attached, updated int64
		if err := rows.Scan(&ep.ID, &ep.TamqEndpointID, &ep.TmuxSocket, &ep.TmuxSession, &ep.Proto, &caps, &state, &attached, &updated); err != nil {
			rows.Close()
			return nil, err
		}
		if err := json.Unmarshal([]byte(caps), &ep.Capabilities); err != nil {
			rows.Close()
			return nil, errs.Wrap(errs.Storage, err, "read the capabilities of endpoint %s", ep.ID)
		}
		ep.State, ep.AttachedAt, ep.UpdatedAt, ep.Windows = lease.EndpointState(state), sqlitedb.FromMillis(attached), sqlitedb.FromMillis(updated), []lease.Window{}
		out = append(out, ep)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		wr, err := s.DB.Query(ctx, `SELECT repo, path, COALESCE(command, ''), mode, no_agent FROM endpoint_repos
			WHERE coordination_endpoint_id = ? ORDER BY repo`, out[i].ID)
		if err != nil {
			return nil, err
		}
		for wr.Next() {
			var w lease.Window
			var mode string
			if err := wr.Scan(&w.Repo, &w.Path, &w.Command, &mode, &w.NoAgent); err != nil {
				wr.Close()
				return nil, err
			}
			w.Mode = lease.WindowMode(mode)
			out[i].Windows = append(out[i].Windows, w)
		}
		wr.Close()
		if err := wr.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
