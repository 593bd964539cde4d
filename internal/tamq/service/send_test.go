package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// aSender is the caller of every send: the agent of one window (or the
// operator typing in it), or one refused.
type aSender struct{ refuse error }

func (s aSender) senderOf(_ context.Context, _ unixrpc.Peer, operatorLine bool) (string, queue.SenderKind, error) {
	switch {
	case s.refuse != nil:
		return "", "", s.refuse
	case operatorLine:
		return "beta", queue.FromOperator, nil
	}
	return "beta", queue.FromWorker, nil
}

func (aSender) paneOf(context.Context, int32) (paneSeen, bool, bool) { return paneSeen{}, false, false }

// endpointList is the endpoint book's list.
type endpointList []queue.Endpoint

func (l endpointList) known(context.Context) ([]queue.Endpoint, error) { return l, nil }

// wokenFor keeps the windows the dispatcher was woken for.
type wokenFor struct{ windows []string }

func (w *wokenFor) wake() { w.windows = append(w.windows, "*") }
func (w *wokenFor) wakeFor(endpointID, target string) {
	w.windows = append(w.windows, endpointID+"/"+target)
}

// The send handler takes a line addressed "To:<repo>: body", from an agent
// through its broker or from the operator, and queues it for the repo's one
// connected window: the body as written (lines and all, CRLF made LF), the
// window's wait noted, a broker's spooled line dated when it was seen (a
// time to come is not believed). It refuses, queuing nothing, a line to a
// repo gita does not register (naming near ones; a receipt records who
// sent it, never the text), a body it would not type (a receipt too), a
// line with no address, a sender the callers refuse, an unknown ack mode,
// and a repo with no window or with windows on two endpoints unless one is
// named.
func TestSendQueuesAnAddressedLineForItsWindow(t *testing.T) {
	t.Parallel()
	seen := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	now := seen.Add(time.Hour)
	window := func(id string, state queue.EndpointState, repos ...string) queue.Endpoint {
		ep := queue.Endpoint{ID: id, State: state}
		for _, r := range repos {
			ep.Windows = append(ep.Windows, queue.Window{Repo: r})
		}
		return ep
	}
	one := endpointList{window("e", queue.Connected, "alpha")}
	// One service's store for every case, whose receipts each case reads
	// from where the one before left them.
	fake := clock.NewFake(now)
	svc, _ := setup(t, Options{Clock: fake})
	t.Cleanup(svc.d.Close) // never run: only the handlers below write
	for _, c := range []struct {
		name      string
		args      api.SendArgs
		sender    aSender
		endpoints endpointList
		waits     string // why the window waits
		// want is the message queued, as "endpoint/target kind sender: body
		// [last error] @created" ("" none); code the refusal's.
		want string
		code errs.Code
		// inError is in the refusal's words; rejected the receipt's target.
		inError, rejected string
	}{
		{name: "an agent's line to a registered repo", args: api.SendArgs{Text: "To:alpha: hello"}, endpoints: one,
			want: "e/alpha worker beta: hello [] @now"},
		{name: "the operator's line typed in the window", args: api.SendArgs{Text: "To:alpha: hello", Operator: true}, endpoints: one,
			want: "e/alpha operator beta: hello [] @now"},
		{name: "a block of several lines", args: api.SendArgs{Text: "To:alpha: one\r\ntwo\n\tthree"}, endpoints: one,
			want: "e/alpha worker beta: one\ntwo\n\tthree [] @now"},
		{name: "its window waiting: queued, saying why", args: api.SendArgs{Text: "To:alpha: hello"}, endpoints: one,
			waits: "the agent is at a dialog", want: "e/alpha worker beta: hello [the agent is at a dialog] @now"},
		{name: "a line the broker kept while the service was down", args: api.SendArgs{Text: "To:alpha: late", ObservedAt: &seen},
			endpoints: one, want: "e/alpha worker beta: late [] @seen"},
		{name: "a time to come is not believed", args: api.SendArgs{Text: "To:alpha: early", ObservedAt: new(now.Add(time.Minute))},
			endpoints: one, want: "e/alpha worker beta: early [] @now"},
		{name: "a repo gita does not register: did you mean", args: api.SendArgs{Text: "To:alpah: hi"}, endpoints: one,
			code: errs.UnknownTarget, inError: "did you mean 'alpha'", rejected: "alpah"},
		{name: "no repo at all", args: api.SendArgs{Text: "To:*: everyone"}, endpoints: one,
			code: errs.UnknownTarget, inError: "unknown target '*'", rejected: "*"},
		{name: "a body it would not type", args: api.SendArgs{Text: "To:alpha: \x1b[201~"}, endpoints: one,
			code: errs.BodyInvalid, inError: "control byte 0x1b", rejected: "alpha"},
		{name: "no address", args: api.SendArgs{Text: "hello"}, endpoints: one, code: errs.Usage, inError: "must start with 'To:<repo>: '"},
		{name: "a window not allowed to send", args: api.SendArgs{Text: "To:alpha: hi"}, endpoints: one,
			sender: aSender{refuse: errs.New(errs.PermissionDeny, "not a window of tamq's")}, code: errs.PermissionDeny},
		{name: "an ack mode it does not know", args: api.SendArgs{Text: "To:alpha: hi", AckMode: "maybe"}, endpoints: one,
			code: errs.BadRequest, inError: "ack mode"},
		{name: "a registered repo without a connected window", args: api.SendArgs{Text: "To:alpha: hi"},
			endpoints: endpointList{window("e", queue.Disconnected, "alpha"), window("f", queue.Connected, "gamma")},
			code:      errs.Unavailable, inError: `no connected endpoint has a window for "alpha"`},
		{name: "windows on two endpoints", args: api.SendArgs{Text: "To:alpha: hi"},
			endpoints: endpointList{window("e", queue.Connected, "alpha"), window("f", queue.Connected, "alpha")},
			code:      errs.Conflict, inError: "2 endpoints (e, f)"},
		{name: "windows on two endpoints, one named", args: api.SendArgs{Text: "To:alpha: hi", EndpointID: "f"},
			endpoints: endpointList{window("e", queue.Connected, "alpha"), window("f", queue.Connected, "alpha")},
			want:      "f/alpha worker beta: hi [] @now"},
		{name: "an endpoint named without its window", args: api.SendArgs{Text: "To:alpha: hi", EndpointID: "f"},
			endpoints: endpointList{window("e", queue.Connected, "alpha"), window("f", queue.Connected, "gamma")},
			code:      errs.Unavailable, inError: "endpoint f does not host"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(rejections(t, svc))
			reg := &gita.Registry{Repos: []gita.Repo{{Name: "alpha", Path: "/src/alpha"}, {Name: "beta", Path: "/src/beta"},
				{Name: "gamma", Path: "/src/gamma"}}}
			var queued []*queue.Message
			woken := &wokenFor{}
			h := &messageHandlers{log: svc.log, clock: fake, config: svc.opts.Config,
				addresses: func() (*gita.Registry, error) { return reg, nil }, callers: c.sender, endpoints: c.endpoints,
				waitReason: func(key string) string {
					if key != store.DeliveryKey("e", "alpha") && key != store.DeliveryKey("f", "alpha") {
						t.Errorf("asked why window %s waits", key)
					}
					return c.waits
				},
				enqueue:    func(_ context.Context, m *queue.Message) error { queued = append(queued, m); return nil },
				dispatcher: woken, receipts: svc.store.Receipts}
			args, err := json.Marshal(c.args)
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.send(context.Background(), unixrpc.Peer{}, &unixrpc.Request{Op: api.OpSend, Args: args})

			if c.code != "" {
				if !errs.Is(err, c.code) || !strings.Contains(err.Error(), c.inError) {
					t.Errorf("refused with %v (%s), want %s with %q", err, errs.CodeOf(err), c.code, c.inError)
				}
				if len(queued) != 0 || len(woken.windows) != 0 {
					t.Errorf("queued %d, dispatcher woken for %q", len(queued), woken.windows)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if c.want != "" {
				if len(queued) != 1 {
					t.Fatalf("%d messages queued, want 1", len(queued))
				}
				m := queued[0]
				at := map[time.Time]string{seen: "seen", {}: "now"}[m.CreatedAt]
				if got := m.EndpointID + "/" + m.Target + " " + string(m.SenderKind) + " " + m.Sender + ": " + m.Body +
					" [" + m.LastError + "] @" + at; got != c.want {
					t.Errorf("queued %q, want %q", got, c.want)
				}
				if m.AckMode != svc.opts.Config.Coordination.DeliveryAckMode && m.AckMode != ackmode.Mode(c.args.AckMode) {
					t.Errorf("ack mode %s", m.AckMode)
				}
				if w := m.EndpointID + "/" + m.Target; len(woken.windows) != 1 || woken.windows[0] != w {
					t.Errorf("dispatcher woken for %q, want %s", woken.windows, w)
				}
				if got, ok := res.(api.Message); !ok || got.Target != m.Target {
					t.Errorf("answered %+v", res)
				}
			}
			if got := rejections(t, svc)[before:]; c.rejected == "" && len(got) != 0 || c.rejected != "" &&
				(len(got) != 1 || got[0] != c.rejected+" from beta ("+string(c.code)+")") {
				t.Errorf("rejections recorded %q, want one of %q", got, c.rejected)
			}
		})
	}
}

// rejections are the refused messages recorded, as "target from sender
// (code)"; their detail holds nothing else (never the text).
func rejections(t *testing.T, svc *Service) []string {
	t.Helper()
	rows, err := svc.db.Reader.Query(`SELECT reason, detail FROM receipts WHERE kind = ? ORDER BY id`, store.KindRejected)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var reason, detail string
		if err := rows.Scan(&reason, &detail); err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(detail), &d); err != nil || len(d) != 3 {
			t.Errorf("rejection detail %s", detail)
		}
		out = append(out, d["target"].(string)+" from "+d["sender"].(string)+" ("+reason+")")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
