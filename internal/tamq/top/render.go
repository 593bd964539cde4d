package top

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/reltime"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Widest cells of the columns that hold names from elsewhere: a long repo
// name or receipt kind is cut, so the columns after it stay in view.
const (
	repoCells   = 28
	kindCells   = 22
	statusCells = 14
	taskCells   = 24
)

// Options shape a frame.
type Options struct {
	// Width and Height are the terminal's cells; 0 leaves lines (rows) uncut.
	Width, Height int
	// Interval is the longest between two refreshes and Rate the recent
	// refreshes a second (they come as the services change), both shown in
	// the interactive title.
	Interval time.Duration
	Rate     float64
	// Interactive adds the keys to the title and marks the Selected row of
	// the loop pane.
	Interactive bool
	Selected    int
	// Overlay, when set, is shown under the loop pane instead of the
	// services' sections: a task's explain or checkpoint, or what Enter did.
	Overlay string
}

// Render is one frame of s as plain text: no colours, no escape sequences.
// Every name, path and error from a service is escaped (textsafe), so
// nothing shown can act in the terminal.
func Render(s Snapshot, o Options) string {
	var b frame
	title := "tamq top  " + s.At.Local().Format(time.DateTime)
	if o.Interactive {
		title += fmt.Sprintf("  on change (%.1f/s), at least every %s  q quits", o.Rate, o.Interval)
	}
	b.add(title)
	b.add("")
	renderLoop(&b, s, o)
	b.add("")
	if o.Overlay != "" {
		for _, l := range strings.Split(strings.TrimRight(o.Overlay, "\n"), "\n") {
			b.add(esc(l))
		}
		b.add("")
		b.add("(Esc goes back)")
		return b.text(o.Width, o.Height)
	}
	renderTamq(&b, s)
	b.add("")
	renderEngine(&b, s)
	return b.text(o.Width, o.Height)
}

// renderLoop is the pane of the loop: the tasks that need the person, then
// the live work, then what waits, each with its repo and where it stands.
func renderLoop(b *frame, s Snapshot, o Options) {
	e := s.Engine
	switch {
	case !e.Running:
		b.add("loop: coordination-engine " + esc(e.Error))
		return
	case e.TasksError != "":
		b.add("loop: ERROR " + esc(e.TasksError))
		return
	}
	var c engineapi.TaskCounts
	if e.Status != nil {
		c = e.Status.Tasks
		// Old standings say their age before them, as in `tasks`.
		if line := engineapi.StaleLine(e.Status.StateHub.UnreachableSince, e.Status.StateHub.LastPoll); line != "" {
			b.add(line)
		}
	}
	head := "loop: nothing needs you"
	if line := c.Line(); line != "" {
		head = "loop: " + line
	}
	if o.Interactive && len(e.Tasks) > 0 {
		head += "  (↑↓ pick, Enter: its window, e: explain, c: checkpoint)"
	}
	b.add(head)
	rows := [][]string{}
	for i, t := range e.Tasks {
		mark := "  "
		if o.Interactive && i == o.Selected {
			mark = "> "
		}
		rows = append(rows, []string{mark + esc(t.ID), cut(esc(t.Repo), repoCells), esc(t.Words)})
	}
	b.table("  ", rows)
	// The selected task's page, where the tracker has one (GitHub): below
	// the table, whole, where a terminal can open it.
	if o.Interactive && o.Selected >= 0 && o.Selected < len(e.Tasks) && e.Tasks[o.Selected].URL != "" {
		b.add("  page: " + esc(e.Tasks[o.Selected].URL))
	}
}

func renderTamq(b *frame, s Snapshot) {
	t := s.Tamq
	if !t.Running {
		b.add("tamq: " + esc(t.Error))
		return
	}
	r := t.Status
	v := r.Service
	b.add(fmt.Sprintf("tamq: running, pid %d, up %s, version %s", v.PID, seconds(v.UptimeSeconds), esc(v.ServerVersion)))
	if r.Queue.Error != "" {
		b.add("  queue: ERROR " + esc(r.Queue.Error))
	} else {
		b.add("  queue: " + counts(r.Queue.Counts, queueStates()))
	}
	if len(r.Endpoints) == 0 {
		b.add("  endpoints: none (open windows with `tamq open REPO...`)")
	}
	for _, ep := range r.Endpoints {
		b.add(fmt.Sprintf("  endpoint %s: %s, tmux %s, %s", esc(ep.ID), esc(ep.State), esc(ep.TmuxSocket), english.Plural(len(ep.Windows), "window", "")))
		rows := [][]string{{"REPO", "MODE", "AGENT", "BROKER", "PROMPT", "QUEUED", "NOTE"}}
		for _, w := range ep.Windows {
			rows = append(rows, []string{cut(esc(w.Repo), repoCells), esc(w.Mode), agentCell(w), yesNo(w.Broker), atPrompt(w),
				fmt.Sprint(w.Waiting), esc(w.WaitReason)})
		}
		b.table("    ", rows)
	}
	h := r.StateHub
	line := fmt.Sprintf("  statehub: %s %s, %s unpublished", esc(h.APIBase), reachable(h.Reachable), english.Plural(h.UnpublishedReceipts, "receipt", ""))
	var problems []string
	if p := h.Publishing; p != nil {
		line += ", via " + esc(p.Via)
		if p.LastSuccessAt != nil {
			line += ", last published " + reltime.Ago(*p.LastSuccessAt, s.At)
		}
		if p.Paused {
			line += ", PAUSED (credentials refused)"
		}
		problems = append(problems, p.LastError)
	}
	b.add(line + errorsOnce(append(problems, h.Error)...))
	c := r.Coordination
	switch {
	case c.Attached:
		var ids []string
		for _, ep := range slices.Sorted(maps.Keys(c.Endpoints)) {
			ids = append(ids, esc(ep)+" as "+esc(c.Endpoints[ep]))
		}
		b.add("  coordination: attached: " + strings.Join(ids, ", "))
	case c.Error != "":
		b.add("  coordination: not attached: " + esc(c.Error))
	default:
		b.add("  coordination: not attached yet")
	}
}

func renderEngine(b *frame, s Snapshot) {
	e := s.Engine
	if !e.Running {
		b.add("coordination-engine: " + esc(e.Error))
		return
	}
	r := e.Status
	v := r.Service
	b.add(fmt.Sprintf("coordination-engine: running, pid %d, up %s, version %s", v.PID, seconds(v.UptimeSeconds), esc(v.ServerVersion)))
	if r.Leases.Error != "" {
		b.add("  leases: ERROR " + esc(r.Leases.Error))
	} else {
		line := "  leases: " + counts(r.Leases.Counts, leaseStates())
		if r.Leases.NextDue != nil {
			line += ", next due " + reltime.Until(*r.Leases.NextDue, s.At)
		}
		b.add(line)
	}
	attached := 0
	for _, ep := range r.Endpoints {
		if ep.State == string(lease.Attached) {
			attached++
		}
	}
	tq := "  tamq: " + reachable(r.Tamq.Reachable) + ", " + english.Plural(attached, "endpoint", "") + " attached"
	if r.Tamq.Error != "" {
		tq += ": " + esc(r.Tamq.Error)
	}
	b.add(tq)
	b.add("  statehub: " + engineHub(r.StateHub, s.At))
	if e.ReceiptsError != "" {
		b.add("  receipts: ERROR " + esc(e.ReceiptsError))
		return
	}
	if len(e.Receipts) == 0 {
		b.add("  receipts: none yet")
		return
	}
	b.add(fmt.Sprintf("  receipts: latest %d, newest first", len(e.Receipts)))
	// The task and repo a receipt is about, in the order of
	// `coordination-engine receipts`: without them a row of lease.offered
	// does not say which task; "-" when it is about none (a start, an attach).
	rows := [][]string{{"TIME", "KIND", "STATUS", "TASK", "REPO", "REASON"}}
	for _, rc := range e.Receipts {
		rows = append(rows, []string{rc.At.Local().Format(time.TimeOnly), cut(esc(rc.Kind), kindCells), cut(esc(rc.Status), statusCells),
			cut(esc(orDash(rc.TaskID)), taskCells), cut(esc(orDash(rc.Repo)), repoCells), esc(rc.Reason)})
	}
	b.table("    ", rows)
}

// engineHub is the engine's side of State Hub: the probe, the observer's
// last look, its event stream and the receipts waiting in its outbox.
func engineHub(h engineapi.StateHubStatus, now time.Time) string {
	where := esc(h.APIBase)
	if h.Kind != "" && h.Kind != "contract" {
		where = esc(h.Kind) + " at " + where
	}
	parts := []string{where + " " + reachable(h.Reachable)}
	if h.LastPoll != nil {
		parts = append(parts, fmt.Sprintf("last look %s (%d looks)", reltime.Ago(*h.LastPoll, now), h.Polls))
	} else {
		parts = append(parts, "no look yet")
	}
	switch {
	case h.EventsConnected:
		parts = append(parts, "events connected")
	case h.EventsOffered:
		parts = append(parts, "events not connected")
	default:
		parts = append(parts, "no event stream")
	}
	switch {
	case h.Paused:
		parts = append(parts, "PAUSED (credentials refused)")
	case h.RetryAt != nil:
		parts = append(parts, "waiting until "+reltime.ClockTime(*h.RetryAt, now)+" as State Hub asked")
	default:
		parts = append(parts, "not paused")
	}
	if b := h.Budget; b != nil {
		parts = append(parts, fmt.Sprintf("%d of %d requests left", b.Remaining, b.Limit))
	}
	parts = append(parts, english.Plural(h.UnpublishedReceipts, "receipt", "")+" waiting")
	if h.LastPublish != nil {
		parts = append(parts, "last published "+reltime.Ago(*h.LastPublish, now))
	}
	return strings.Join(parts, ", ") + errorsOnce(h.ObserveError, h.PublishError, h.Error)
}

// errorsOnce shows each distinct error once: the probe, the observer and the
// publisher often fail for the same reason, in the same words.
func errorsOnce(list ...string) string {
	var seen []string
	out := ""
	for _, e := range list {
		if e != "" && !slices.Contains(seen, e) {
			seen = append(seen, e)
			out += ", ERROR " + esc(e)
		}
	}
	return out
}

func queueStates() []string {
	var out []string
	for _, s := range queue.States {
		out = append(out, string(s))
	}
	return out
}

func leaseStates() []string {
	var out []string
	for _, s := range lease.States {
		out = append(out, string(s))
	}
	return out
}

// counts shows every known state in its order, zeros included (a state
// that empties must not vanish from a refreshing view), then any state a
// newer service reports that this build does not know.
func counts(m map[string]int, known []string) string {
	var parts []string
	for _, st := range known {
		parts = append(parts, fmt.Sprintf("%s %d", st, m[st]))
	}
	for _, st := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, st) {
			parts = append(parts, fmt.Sprintf("%s %d", esc(st), m[st]))
		}
	}
	return strings.Join(parts, ", ")
}

// agentCell is a window's life in a few letters, as the table has room for:
// alive; EXITED and its status (tamq status says what the status means);
// CLOSED, its window closed; GONE, its tmux server gone.
func agentCell(w tamqapi.EndpointWindow) string {
	switch {
	case w.Alive:
		return "alive"
	case w.Ended == string(queue.AgentExited) && w.ExitStatus != nil:
		return fmt.Sprintf("EXITED %d", *w.ExitStatus)
	case w.Ended == string(queue.AgentExited):
		return "EXITED"
	case w.Ended == string(queue.WindowClosed):
		return "CLOSED"
	}
	return "GONE"
}

// atPrompt is known only when the service held messages back because the
// agent was elsewhere (a dialog, a running turn): the status document says so
// in the wait reason (the words of the service's notAtPrompt) and has no
// field for it otherwise.
func atPrompt(w tamqapi.EndpointWindow) string {
	if strings.HasPrefix(w.WaitReason, "the agent is not at its prompt") {
		return "no"
	}
	return "-"
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func reachable(v bool) string {
	if v {
		return "reachable"
	}
	return "NOT reachable"
}

func seconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func esc(s string) string { return textsafe.Escape(s) }

// cut shortens s to n cells, marking the cut.
func cut(s string, n int) string {
	if ansi.StringWidth(s) <= n {
		return s
	}
	return ansi.Truncate(s, n, "…")
}

// frame collects a frame's lines.
type frame struct{ lines []string }

func (f *frame) add(line string) { f.lines = append(f.lines, line) }

// table adds rows with their columns aligned (by cells, not bytes); the
// last column is not padded.
func (f *frame) table(indent string, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	for _, r := range rows {
		var sb strings.Builder
		sb.WriteString(indent)
		for i, c := range r {
			sb.WriteString(c)
			if i < len(r)-1 {
				sb.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
			}
		}
		f.add(strings.TrimRight(sb.String(), " "))
	}
}

// text joins the lines, each cut to width and the whole to height (the last
// row then says how many lines did not fit).
func (f *frame) text(width, height int) string {
	lines := f.lines
	if height > 0 && len(lines) > height {
		more := len(lines) - height + 1
		lines = append(lines[:height-1:height-1], fmt.Sprintf("… %d more lines (a taller terminal shows them)", more))
	}
	var sb strings.Builder
	for _, l := range lines {
		if width > 0 {
			l = cut(l, width)
		}
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// orDash is s, or "-" when it is empty, so a column never reads blank.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
