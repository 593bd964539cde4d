package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// Register records an endpoint as connected with its windows (replacing what
// was recorded for the same repos), with a receipt, in one transaction. A
// forgotten endpoint that comes back (the same tmux server pid) is
// remembered again.
func (s *EndpointTable) Register(ctx context.Context, ep queue.Endpoint) error {
	now := sqlitedb.Millis(s.Now())
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.DB.TxExec(tx, `INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, `+sqlLit(queue.Connected)+`, ?, ?)
			ON CONFLICT (id) DO UPDATE SET tmux_socket = excluded.tmux_socket, session_name = excluded.session_name,
			state = excluded.state, forgotten_at = NULL, updated_at = excluded.updated_at`,
			ep.ID, ep.TmuxSocket, ep.ServerPID, ep.Session, now, now); err != nil {
			return err
		}
		for _, w := range ep.Windows {
			// A reused window keeps its recorded command, and its mode unless a
			// new one is given; a new window's row is replaced whole.
			// A window registered runs its agent: whatever ended before is over.
			if _, err := s.DB.TxExec(tx, `INSERT INTO windows (endpoint_id, repo, repo_path, window_id, pane_id, mode, command, created_at, updated_at)
				VALUES (?1, ?2, ?3, ?4, ?5, COALESCE(?6, `+sqlLit(queue.Manual)+`), ?7, ?8, ?8)
				ON CONFLICT (endpoint_id, repo) DO UPDATE SET repo_path = excluded.repo_path, window_id = excluded.window_id,
				pane_id = excluded.pane_id, mode = COALESCE(?6, windows.mode),
				command = CASE WHEN ?9 THEN windows.command ELSE excluded.command END, updated_at = excluded.updated_at,
				agent_end = NULL, exit_status = NULL, ended_at = NULL`,
				ep.ID, w.Repo, w.RepoPath, w.WindowID, w.PaneID, sqlitedb.NullString(string(w.Mode)), sqlitedb.NullString(w.Command), now, w.Reused); err != nil {
				return err
			}
		}
		return s.receipts.AddReceiptTx(tx, receipt.Receipt{
			Kind: "endpoint.register", SubjectID: ep.ID, Status: string(queue.Connected), EndpointID: ep.ID,
			Detail: map[string]any{"windows": len(ep.Windows), "tmux_server_pid": ep.ServerPID},
		})
	})
	return storageErr(err, "record endpoint "+ep.ID)
}

// SetEndpointState marks an endpoint connected or disconnected; reason says
// why (for the receipt) and may be empty.
func (s *EndpointTable) SetEndpointState(ctx context.Context, id string, state queue.EndpointState, reason string) error {
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE endpoints SET state = ?, updated_at = ? WHERE id = ? AND state <> ?`, string(state), sqlitedb.Millis(s.Now()), id, string(state))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		return s.receipts.AddReceiptTx(tx, receipt.Receipt{Kind: "endpoint.state", SubjectID: id, Status: string(state), Reason: reason, EndpointID: id})
	})
	return storageErr(err, "record the state of endpoint "+id)
}

// SetWindowEnd records how the agent of repo's window on an endpoint ended
// (end "" : it runs again), with its exit status (-1: not known), for the
// window on pane paneID only: a window registered since is left alone. It
// says whether anything changed; the receipt is written only then.
func (s *EndpointTable) SetWindowEnd(ctx context.Context, endpointID, repo, paneID string, end queue.AgentEnd, exitStatus int) (bool, error) {
	var changed bool
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		status := sql.NullInt64{Int64: int64(exitStatus), Valid: end == queue.AgentExited && exitStatus >= 0}
		var endedAt sql.NullInt64
		if end != "" {
			endedAt = sql.NullInt64{Int64: sqlitedb.Millis(s.Now()), Valid: true}
		}
		res, err := s.DB.TxExec(tx, `UPDATE windows SET agent_end = ?1, exit_status = ?2, ended_at = ?3
			WHERE endpoint_id = ?4 AND repo = ?5 AND pane_id = ?6
			AND (agent_end IS NOT ?1 OR exit_status IS NOT ?2)`,
			sqlitedb.NullString(string(end)), status, endedAt, endpointID, repo, paneID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		changed = true
		st, detail := string(end), map[string]any{"repo": repo, "pane_id": paneID}
		if end == "" {
			st = "running"
		}
		if status.Valid {
			detail["exit_status"] = exitStatus
		}
		return s.receipts.AddReceiptTx(tx, receipt.Receipt{Kind: "window.agent", SubjectID: endpointID, Status: st, EndpointID: endpointID, Detail: detail})
	})
	return changed, storageErr(err, "record how the agent of "+repo+" ended")
}

// Endpoints lists the recorded endpoints with their windows, newest first.
// Forgotten endpoints are left out unless withForgotten.
func Endpoints(ctx context.Context, db *sql.DB, withForgotten bool) ([]queue.Endpoint, error) {
	eps, err := endpoints(ctx, db, withForgotten)
	return eps, storageErr(err, "read endpoints")
}

func endpoints(ctx context.Context, db *sql.DB, withForgotten bool) ([]queue.Endpoint, error) {
	q := `SELECT id, tmux_socket, tmux_server_pid, session_name, state, forgotten_at IS NOT NULL FROM endpoints`
	if !withForgotten {
		q += ` WHERE forgotten_at IS NULL`
	}
	rows, err := db.QueryContext(ctx, q+` ORDER BY updated_at DESC, id`)
	if err != nil {
		return nil, err
	}
	var out []queue.Endpoint
	for rows.Next() {
		var ep queue.Endpoint
		var state string
		if err := rows.Scan(&ep.ID, &ep.TmuxSocket, &ep.ServerPID, &ep.Session, &state, &ep.Forgotten); err != nil {
			rows.Close()
			return nil, err
		}
		ep.State, ep.Windows = queue.EndpointState(state), []queue.Window{}
		out = append(out, ep)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		wr, err := db.QueryContext(ctx, `SELECT repo, repo_path, COALESCE(window_id, ''), COALESCE(pane_id, ''), mode, COALESCE(command, ''),
			COALESCE(agent_end, ''), COALESCE(exit_status, -1)
			FROM windows WHERE endpoint_id = ? ORDER BY repo`, out[i].ID)
		if err != nil {
			return nil, err
		}
		for wr.Next() {
			var w queue.Window
			var mode, ended string
			if err := wr.Scan(&w.Repo, &w.RepoPath, &w.WindowID, &w.PaneID, &mode, &w.Command, &ended, &w.ExitStatus); err != nil {
				wr.Close()
				return nil, err
			}
			w.Mode, w.Ended = queue.WindowMode(mode), queue.AgentEnd(ended)
			out[i].Windows = append(out[i].Windows, w)
		}
		wr.Close()
		if err := wr.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Rebind moves the undelivered messages of a replaced endpoint for the given
// repos to its replacement (the same tmux socket after a server restart or a
// reboot), so they reach the new windows under their same ids.
func (s *EndpointTable) Rebind(ctx context.Context, oldID, newID string, repos []string) (int, error) {
	if len(repos) == 0 {
		return 0, nil
	}
	var n int64
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		args := []any{newID, sqlitedb.Millis(s.Now()), oldID}
		for _, r := range repos {
			args = append(args, r)
		}
		res, err := s.DB.TxExec(tx, `UPDATE message_rows SET endpoint_id = ?, updated_at = ? WHERE endpoint_id = ?
			AND state IN `+undelivered+` AND target_repo IN (SELECT code FROM message_texts
				WHERE text IN (?`+strings.Repeat(", ?", len(repos)-1)+`))`, args...)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.receipts.AddReceiptTx(tx, receipt.Receipt{Kind: "endpoint.rebind", SubjectID: newID, Status: "rebound", EndpointID: newID,
			Detail: map[string]any{"from_endpoint": oldID, "messages": n}})
	})
	return int(n), storageErr(err, "move messages from endpoint "+oldID+" to "+newID)
}

// PendingOn counts the undelivered messages bound to an endpoint for each
// target repo: queued or awaiting an ack (a delivery under way belongs to
// the service writing it).
func PendingOn(ctx context.Context, db *sql.DB, endpointID string) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT (SELECT text FROM message_texts WHERE code = target_repo), count(*) FROM message_rows
		WHERE endpoint_id = ? AND state IN `+undelivered+` GROUP BY target_repo`, endpointID)
	if err != nil {
		return nil, storageErr(err, "count pending messages")
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var repo string
		var n int
		if err := rows.Scan(&repo, &n); err != nil {
			return nil, storageErr(err, "count pending messages")
		}
		out[repo] = n
	}
	return out, storageErr(rows.Err(), "count pending messages")
}

// QueuedByWindow counts the queued messages of every window, by DeliveryKey.
func QueuedByWindow(ctx context.Context, db *sql.DB) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT endpoint_id, (SELECT text FROM message_texts WHERE code = target_repo), count(*)
		FROM message_rows WHERE state = `+stateLit(queue.Queued)+` AND endpoint_id IS NOT NULL GROUP BY endpoint_id, target_repo`)
	if err != nil {
		return nil, storageErr(err, "count queued messages")
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var ep, repo string
		var n int
		if err := rows.Scan(&ep, &repo, &n); err != nil {
			return nil, storageErr(err, "count queued messages")
		}
		out[DeliveryKey(ep, repo)] = n
	}
	return out, storageErr(rows.Err(), "count queued messages")
}

// Forget marks an endpoint that is gone for good as forgotten: it stays in
// history, but is no longer listed, restored or counted. Its undelivered
// messages fail (with a receipt each), so `tamq retry` can send them again
// through a live endpoint. A connected endpoint cannot be forgotten.
func (s *EndpointTable) Forget(ctx context.Context, id string) (failed int, err error) {
	now := s.Now()
	err = s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		var state string
		var forgotten sql.NullInt64
		err := s.DB.TxQueryRow(tx, `SELECT state, forgotten_at FROM endpoints WHERE id = ?`, id).Scan(&state, &forgotten)
		if errors.Is(err, sql.ErrNoRows) {
			return errs.New(errs.NotFound, "no endpoint %s", id).WithHint("see `tamq endpoints`")
		}
		if err != nil {
			return err
		}
		if queue.EndpointState(state) == queue.Connected {
			return errs.New(errs.Conflict, "endpoint %s is connected: its tmux server runs", id).
				WithHint("only an endpoint whose tmux server is gone can be forgotten")
		}
		if forgotten.Valid {
			return nil
		}
		if _, err := s.DB.TxExec(tx, `UPDATE endpoints SET forgotten_at = ?, updated_at = ? WHERE id = ?`, sqlitedb.Millis(now), sqlitedb.Millis(now), id); err != nil {
			return err
		}
		pending, err := readMessages(tx.QueryContext(ctx, `SELECT `+messageColumns+` FROM message_rows WHERE endpoint_id = ? AND state IN `+undelivered, id))
		if err != nil {
			return err
		}
		for i := range pending {
			m := &pending[i]
			from := m.State
			m.Abandon(now, "endpoint "+id+" was forgotten")
			if err := s.deliveries.saveTx(tx, m); err != nil {
				return err
			}
			if err := s.receipts.AddReceiptTx(tx, transitionReceipt(m, from, "endpoint forgotten")); err != nil {
				return err
			}
		}
		failed = len(pending)
		return s.receipts.AddReceiptTx(tx, receipt.Receipt{Kind: "endpoint.forget", SubjectID: id, Status: "forgotten", EndpointID: id,
			Detail: map[string]any{"failed_messages": failed}})
	})
	return failed, storageErr(err, "forget endpoint "+id)
}

// MarkEndpointsDisconnected records that no endpoint is reachable through this
// service any more (it is stopping); it returns how many were connected.
func (s *EndpointTable) MarkEndpointsDisconnected(ctx context.Context) (int, error) {
	var n int64
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE endpoints SET state = `+sqlLit(queue.Disconnected)+`, updated_at = ?
			WHERE state = `+sqlLit(queue.Connected), sqlitedb.Millis(s.Now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), storageErr(err, "mark endpoints disconnected")
}
