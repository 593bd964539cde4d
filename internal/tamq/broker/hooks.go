package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// HookSocketEnv names the variable that tells an agent's hooks (through
// `tamq hook`) where their window's broker listens.
const HookSocketEnv = "TAMQ_HOOK_SOCKET"

// HookEvent is what an agent's hook reports: the event's name (Claude Code's
// hook_event_name, Codex's hook event or notify type), a notification's
// type, and the tool a permission is asked for. Nothing else of the hook's
// input (prompts, tool arguments) is kept or forwarded.
type HookEvent struct {
	Event string `json:"event"`
	Type  string `json:"type,omitempty"`
	Tool  string `json:"tool,omitempty"`
}

// ParseHook reads the JSON an agent passes its hook: Claude Code's
// (hook_event_name, notification_type, tool_name), Codex's and Gemini
// CLI's hooks (the same names) and Codex's notify ({"type":"agent-turn-complete"}). It walks
// the top-level fields and skips the rest, so input cut short after the
// fields it wants (a huge tool input) still reads.
func ParseHook(raw []byte) (HookEvent, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return HookEvent{}, errors.New("hook input is not a JSON object")
	}
	var e HookEvent
	var notifyType string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var dst *string
		switch key {
		case "hook_event_name":
			dst = &e.Event
		case "notification_type":
			dst = &e.Type
		case "tool_name":
			dst = &e.Tool
		case "type":
			dst = &notifyType
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if dst != nil {
			json.Unmarshal(v, dst) // a value of another type leaves it empty
		}
	}
	if e.Event == "" {
		e.Event = notifyType // Codex's notify names its event "type"
	}
	if e.Event == "" {
		return HookEvent{}, errors.New("hook input names no event")
	}
	return HookEvent{Event: cut(e.Event, 64), Type: cut(e.Type, 64), Tool: cut(e.Tool, 64)}, nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// HookStale is how long the screen must show the prompt, after a hook said
// a dialog opened, before that word is taken as out of date: nothing fires
// when the user dismisses a dialog with Esc. HookStaleSeen is the same when
// the screen showed the dialog (not the prompt) after the hook and shows the
// prompt again: a person closed it, and a delivery held by it goes in soon
// after; one held by a dialog the screen never showed (a program whose
// screens tamq cannot read) waits the longer time.
const (
	HookStale     = 5 * time.Second
	HookStaleSeen = time.Second
)

// HookState is what the agent's hooks have said: whether a dialog is open
// (a permission request not yet answered), and a count of events, so a
// delivery can tell that something happened between its checks and its
// Enter. It does no I/O; the time is passed in.
type HookState struct {
	mu          sync.Mutex
	seq         uint64
	dialog      string
	since       time.Time
	promptSince time.Time
	// seen: the screen showed something other than the prompt since the
	// dialog's hook (the dialog itself).
	seen bool
}

// Apply takes one event.
func (h *HookState) Apply(e HookEvent, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	switch e.Event {
	case "PermissionRequest":
		h.open(fmt.Sprintf("the agent asks permission%s (hook PermissionRequest)", forTool(e.Tool)), now)
	case "Notification":
		switch e.Type {
		case "permission_prompt", "elicitation_dialog", "ToolPermission":
			// Gemini CLI's Notification says ToolPermission when it asks.
			h.open("the agent waits for an answer (hook Notification "+e.Type+")", now)
		case "idle_prompt":
			h.dialog = ""
		}
	case "Stop", "SubagentStop", "UserPromptSubmit", "SessionStart", "PostToolUse", "PostToolUseFailure",
		"Interrupt", "agent-turn-complete",
		"BeforeAgent", "AfterAgent", "AfterTool": // Gemini CLI's
		// A turn ended, a prompt was submitted, or the tool asked about ran:
		// whatever dialog there was is answered.
		h.dialog = ""
	}
}

func forTool(tool string) string {
	if tool == "" {
		return ""
	}
	return " for " + tool
}

func (h *HookState) open(reason string, now time.Time) {
	h.dialog, h.since, h.promptSince, h.seen = reason, now, time.Time{}, false
}

// Seq counts the events so far.
func (h *HookState) Seq() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Dialog returns why the hooks say a dialog is open, or "". The screen's
// word (atPrompt) retires a dialog once the prompt has shown for HookStale,
// both since the event and without a break; for HookStaleSeen when the
// screen showed the dialog in between.
func (h *HookState) Dialog(atPrompt bool, now time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dialog == "" {
		return ""
	}
	if !atPrompt {
		h.promptSince, h.seen = time.Time{}, true
		return h.dialog
	}
	if h.promptSince.IsZero() {
		h.promptSince = now
	}
	stale := HookStale
	if h.seen {
		stale = HookStaleSeen
	}
	if now.Sub(h.promptSince) >= stale && now.Sub(h.since) >= stale {
		h.dialog = ""
	}
	return h.dialog
}

// HookListener is the broker's private socket for its agent's hooks, in
// tamq's 0700 state directory, 0600 itself. Only its own window is heard: a
// peer of another uid, or a process of the user's that does not descend
// from the broker (another window's agent, any program of the user's), is
// closed unread. A fake permission event would hold the window's
// deliveries, keep its lease renewed and show the operator a dialog that
// does not exist.
type HookListener struct {
	ln    *unixrpc.Listener
	wg    sync.WaitGroup
	uid   uint32
	owner int
	take  func(HookEvent)
	// refused counts the connections closed unread.
	refused atomic.Int64
}

// hookNames name the hook socket's listener in messages.
var hookNames = unixrpc.Names{Program: "the broker"}

// HookSocketFor is the hook socket of the broker with process id pid.
func HookSocketFor(stateDir string, pid int) string {
	return filepath.Join(stateDir, "hooks", fmt.Sprintf("%d.sock", pid))
}

// ListenHooks listens at path and hands each event from a descendant of
// owner (the broker's own pid: its agent and what the agent runs, which
// stay under the broker as it is their subreaper) to take.
func ListenHooks(path string, owner int, take func(HookEvent)) (*HookListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	sweepHooks(filepath.Dir(path))
	ln, err := unixrpc.Listen(path, hookNames)
	if err != nil {
		return nil, err
	}
	h := &HookListener{ln: ln, uid: uint32(os.Getuid()), owner: owner, take: take}
	h.wg.Add(1)
	go h.serve()
	return h, nil
}

// SweepHooks removes, under stateDir, the hook sockets of brokers that no
// longer run. The tamq service runs it as it starts: a tmux server killed
// with its windows takes every broker down at once, none of them closes, and
// no new broker may come to sweep for a long time.
func SweepHooks(stateDir string) {
	sweepHooks(filepath.Join(stateDir, "hooks"))
}

// sweepHooks removes the sockets of brokers that no longer run. A broker
// that could not close (killed, or the machine went down) leaves its socket
// in the state directory, which would otherwise gain a file for every such
// window, for ever. The name is the pid. A live broker's socket stays; a pid
// alive but no broker's (reused since) is asked too: only a socket nobody
// listens on (connection refused) goes, so a broker run under another name
// (a test's) keeps its own.
func sweepHooks(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".sock"))
		if err != nil || pid <= 0 || e.Type()&fs.ModeSocket == 0 || e.Name() != strconv.Itoa(pid)+".sock" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if proc.Exited(pid) || (!runsBroker(pid) && nobodyListens(path)) {
			os.Remove(path)
		}
	}
}

// runsBroker says whether pid's command line is a tamq broker's.
func runsBroker(pid int) bool {
	argv, err := proc.Cmdline(pid)
	if err != nil {
		return false
	}
	_, ok := program.BrokerChild(argv)
	return ok
}

// nobodyListens says whether a connection to the socket at path is refused:
// its listener is gone. Any other outcome (a listener, a timeout) keeps it.
func nobodyListens(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// Path is where the listener listens.
func (h *HookListener) Path() string { return h.ln.Path }

// Close stops listening and removes the socket.
func (h *HookListener) Close() {
	h.ln.Close()
	h.ln.Remove()
	h.wg.Wait()
}

// hookConns bounds the hook connections served at once: a hook sends one
// short line, so more at once is a flood, closed unread.
const hookConns = 16

// acceptRetry paces the accepts that failed (out of descriptors and the
// like): soon at first, at most once a second while it lasts.
var acceptRetry = backoff.Policy{Min: 5 * time.Millisecond, Max: time.Second}

func (h *HookListener) serve() {
	defer h.wg.Done()
	slots := make(chan struct{}, hookConns)
	var pause time.Duration
	for {
		c, err := h.ln.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors and the like: the agent's hooks must still
			// reach the broker once the spell ends.
			pause = acceptRetry.Next(pause)
			time.Sleep(pause)
			continue
		}
		pause = 0
		select {
		case slots <- struct{}{}:
		default:
			c.Close()
			continue
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer func() { <-slots }()
			defer c.Close()
			if !h.fromOwnWindow(c) {
				h.refused.Add(1)
				return
			}
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadBytes('\n')
			if err != nil && len(line) == 0 {
				return
			}
			var e HookEvent
			if json.Unmarshal(line, &e) != nil || e.Event == "" {
				return
			}
			h.take(e)
		}()
	}
}

// Refused counts the connections closed unread: of another user, or from
// outside the broker's own process tree.
func (h *HookListener) Refused() int64 { return h.refused.Load() }

// fromOwnWindow says whether the peer is the user's and runs under the
// broker (peer credentials, then the process tree).
func (h *HookListener) fromOwnWindow(c *net.UnixConn) bool {
	peer, err := unixrpc.PeerOf(c)
	if err != nil || peer.UID != h.uid {
		return false
	}
	chain, err := proc.Ancestors(int(peer.PID))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(chain, func(st proc.Stat) bool { return st.PID == h.owner })
}

// SendHook forwards one event to the broker listening at path, only if that
// broker is the user's own (what a hook reports may name the agent's tools).
func SendHook(path string, e HookEvent, timeout time.Duration) error {
	c, err := unixrpc.Dial(context.Background(), path, "", hookNames, net.Dialer{Timeout: timeout})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err = c.Write(append(b, '\n')); err != nil {
		return err
	}
	// Stay until the broker is done with the connection: it places this
	// process in its window's process tree, which a process that has
	// exited (and been reaped) is no longer in.
	if uc, ok := c.(*net.UnixConn); ok {
		uc.CloseWrite()
	}
	io.Copy(io.Discard, c)
	return nil
}
