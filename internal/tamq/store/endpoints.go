package store

import (
	"context"
	"database/sql"

	"github.com/tmux-amq/tamq/internal/protocol"

	"github.com/tmux-amq/tamq/internal/receipt"
)

// Endpoint and Window are stored as the protocol describes them; Alive is
// not stored (status asks tmux).
type (
	Endpoint = protocol.Endpoint
	Window   = protocol.EndpointWindow
)

// Register records an endpoint as connected with its windows (replacing what
// was recorded for the same repos), with a receipt, in one transaction.
func (s *Store) Register(ctx context.Context, ep Endpoint) error {
	now := ms(s.Now())
	return s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := s.DB.TxExec(tx, `INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, 'connected', ?, ?)
			ON CONFLICT (id) DO UPDATE SET tmux_socket = excluded.tmux_socket, session_name = excluded.session_name,
			state = 'connected', updated_at = excluded.updated_at`,
			ep.ID, ep.TmuxSocket, ep.ServerPID, ep.Session, now, now); err != nil {
			return err
		}
		for _, w := range ep.Windows {
			// A reused window keeps its recorded command, and its mode unless a
			// new one is given; a new window's row is replaced whole.
			if _, err := s.DB.TxExec(tx, `INSERT INTO windows (endpoint_id, repo, repo_path, window_id, pane_id, mode, command, created_at, updated_at)
				VALUES (?1, ?2, ?3, ?4, ?5, COALESCE(?6, 'manual'), ?7, ?8, ?8)
				ON CONFLICT (endpoint_id, repo) DO UPDATE SET repo_path = excluded.repo_path, window_id = excluded.window_id,
				pane_id = excluded.pane_id, mode = COALESCE(?6, windows.mode),
				command = CASE WHEN ?9 THEN windows.command ELSE excluded.command END, updated_at = excluded.updated_at`,
				ep.ID, w.Repo, w.RepoPath, w.WindowID, w.PaneID, nullStr(w.Mode), nullStr(w.Command), now, w.Reused); err != nil {
				return err
			}
		}
		return s.AddReceiptTx(tx, receipt.Receipt{
			Kind: "endpoint.register", SubjectID: ep.ID, Status: "connected", EndpointID: ep.ID,
			Detail: map[string]any{"windows": len(ep.Windows), "tmux_server_pid": ep.ServerPID},
		})
	})
}

// SetEndpointState marks an endpoint connected or disconnected.
func (s *Store) SetEndpointState(ctx context.Context, id, state string) error {
	return s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE endpoints SET state = ?, updated_at = ? WHERE id = ? AND state <> ?`, state, ms(s.Now()), id, state)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		return s.AddReceiptTx(tx, receipt.Receipt{Kind: "endpoint.state", SubjectID: id, Status: state, EndpointID: id})
	})
}

// Endpoints lists the recorded endpoints with their windows, newest first.
func Endpoints(ctx context.Context, db *sql.DB) ([]Endpoint, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, tmux_socket, tmux_server_pid, session_name, state FROM endpoints ORDER BY updated_at DESC, id`)
	if err != nil {
		return nil, err
	}
	var out []Endpoint
	for rows.Next() {
		var ep Endpoint
		if err := rows.Scan(&ep.ID, &ep.TmuxSocket, &ep.ServerPID, &ep.Session, &ep.State); err != nil {
			rows.Close()
			return nil, err
		}
		ep.Windows = []Window{}
		out = append(out, ep)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		wr, err := db.QueryContext(ctx, `SELECT repo, repo_path, COALESCE(window_id, ''), COALESCE(pane_id, ''), mode, COALESCE(command, '')
			FROM windows WHERE endpoint_id = ? ORDER BY repo`, out[i].ID)
		if err != nil {
			return nil, err
		}
		for wr.Next() {
			var w Window
			if err := wr.Scan(&w.Repo, &w.RepoPath, &w.WindowID, &w.PaneID, &w.Mode, &w.Command); err != nil {
				wr.Close()
				return nil, err
			}
			out[i].Windows = append(out[i].Windows, w)
		}
		wr.Close()
		if err := wr.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Rebind moves the undelivered messages of a replaced endpoint to its one
// replacement (the same tmux socket after a reboot or a server restart), so
// they reach the new windows under their same ids.
func (s *Store) Rebind(ctx context.Context, oldID, newID string) (int, error) {
	var n int64
	err := s.DB.WriteTx(ctx, func(tx *sql.Tx) error {
		res, err := s.DB.TxExec(tx, `UPDATE messages SET endpoint_id = ?, updated_at = ? WHERE endpoint_id = ? AND state IN ('queued', 'awaiting_ack')`,
			newID, ms(s.Now()), oldID)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.AddReceiptTx(tx, receipt.Receipt{Kind: "endpoint.rebind", SubjectID: newID, Status: "rebound", EndpointID: newID,
			Detail: map[string]any{"from_endpoint": oldID, "messages": n}})
	})
	return int(n), err
}
