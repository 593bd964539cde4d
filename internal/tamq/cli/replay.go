package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/jsonl"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// replayChunkBytes is how much encoded entries one request carries: one
// protocol frame, with room for the largest single entry above it.
const replayChunkBytes = unixrpc.MaxFrame - 8<<10

type replayRecord struct {
	File       string              `json:"file"`
	EndpointID string              `json:"endpoint_id"`
	BatchID    string              `json:"batch_id"`
	Summary    api.ReplaySummary   `json:"summary"`
	Rejections []api.ReplayOutcome `json:"rejections"`
	Stopped    bool                `json:"stopped,omitempty"` // --strict stopped at a rejection
}

func newReplayCmd(a *app.App) *cobra.Command {
	var endpoint string
	var strict bool
	cmd := &cobra.Command{
		Use:   "replay FILE|- --endpoint ID",
		Short: "Queue the messages of a JSONL export again, into one endpoint",
		Long: `Queue every message of a JSONL export (tamq export) again, as new messages of
one new batch in the endpoint ID. Each line goes through what a new message goes
through: the target must be a registered repo with a window on that endpoint,
the body must pass the body rules, the active policy must allow it. The new
message records the original's id; a line already replayed into the endpoint is
skipped and counted, and nothing existing is ever changed. A wake from
coordination-engine is left out with a note on stderr (it belongs to a lease
the engine judges, not to history); it is no rejection. A line that cannot
be read or is rejected is reported with its number and reason, and the others
go on (--strict stops at the first). The service must be running.

The exit status is 0 when no line was rejected, else that of the first
rejection's error code.`,
		Example: `  tamq replay history.jsonl --endpoint tmux-amq-4242
  tamq export --repo net-kingdom - | tamq replay - --endpoint tmux-amq-4242`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"jsonl"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if endpoint == "" {
				return app.UsageError("--endpoint is required (`tamq status` lists the endpoints)")
			}
			p, err := a.Paths()
			if err != nil {
				return err
			}
			in, size, closeIn, err := openInput(a, args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			r := &replayer{client: client.New(p), args: api.ReplayArgs{EndpointID: endpoint, Strict: strict},
				a: a, rec: replayRecord{File: displayName(args[0]), EndpointID: endpoint, Rejections: []api.ReplayOutcome{}}}
			// An empty first request checks the endpoint and names the batch
			// before any line is read.
			if err := r.call(cmd.Context()); err != nil {
				return err
			}
			progress := app.NewProgress(a, size, "replaying", "bytes")
			err = r.run(cmd.Context(), &countingReader{r: in, progress: progress})
			progress.Done()
			if err != nil {
				// What was accepted stays queued; say how far it got.
				s := r.rec.Summary
				e := errs.Wrap(errs.CodeOf(err), err, "replay stopped after %d lines (%d accepted, %d duplicates, %d rejected) of batch %s",
					s.Lines, s.Accepted, s.Duplicates, s.Rejected, r.rec.BatchID)
				if s.Lines > 0 {
					return e.WithHint("replaying the file again skips what was accepted")
				}
				return e
			}
			r.args.Summary = &r.rec.Summary
			if err := r.call(cmd.Context()); err != nil {
				return err
			}
			if a.JSON {
				if err := a.PrintJSON(r.rec); err != nil {
					return err
				}
			} else if !a.Quiet {
				s := r.rec.Summary
				wakes := ""
				if s.Skipped > 0 {
					wakes = fmt.Sprintf(", %d wakes left out", s.Skipped)
				}
				a.Printf("replayed %s into %s as batch %s: %d accepted, %d skipped as duplicates%s, %d rejected (%d lines)\n",
					textsafe.Escape(r.rec.File), textsafe.Escape(endpoint), r.rec.BatchID, s.Accepted, s.Duplicates, wakes, s.Rejected, s.Lines)
				if r.rec.Stopped {
					a.Printf("stopped at the first rejected line (--strict)\n")
				}
			}
			if len(r.rec.Rejections) > 0 {
				first := r.rec.Rejections[0]
				return app.PassStatus(errs.ExitStatus(errs.Code(first.Code)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the endpoint to queue the messages into (required)")
	cmd.Flags().BoolVar(&strict, "strict", false, "stop at the first line that cannot be read or is rejected")
	cmd.RegisterFlagCompletionFunc("endpoint", completeEndpoints(a))
	return cmd
}

// completeEndpoints completes endpoint ids, described by state and
// windows: the service's list, or the database's, read-only, when the
// service does not answer (a completion must not start it). Forgotten
// endpoints are left out; nothing is printed on failure.
func completeEndpoints(a *app.App) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, ep := range knownEndpoints(cmd.Context(), a) {
			if strings.HasPrefix(ep.ID, toComplete) {
				repos := make([]string, len(ep.Windows))
				for i, w := range ep.Windows {
					repos[i] = w.Repo
				}
				out = append(out, cobra.CompletionWithDesc(ep.ID, ep.State+": "+strings.Join(repos, ", ")))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// knownEndpoints are the endpoints not forgotten, as the service or else
// the database has them; none when neither can say.
func knownEndpoints(ctx context.Context, a *app.App) []api.Endpoint {
	p, err := a.Paths()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if res, err := client.New(p).Endpoints(ctx, false); err == nil {
		return res.Endpoints
	}
	cfg, err := a.Config()
	if err != nil {
		return nil
	}
	db, ok, err := openHistoryAt(ctx, p, cfg)
	if !ok || err != nil {
		return nil
	}
	defer db.Close()
	eps, err := store.Endpoints(ctx, db, false)
	if err != nil {
		return nil
	}
	out := make([]api.Endpoint, len(eps))
	for i, ep := range eps {
		out[i] = api.EndpointOf(ep)
	}
	return out
}

// replayer reads lines, sends them in chunks and counts what became of them.
// Reading and parsing run one chunk ahead of the service's work on the
// previous one, so the two overlap.
type replayer struct {
	client *client.Client
	a      *app.App
	args   api.ReplayArgs
	rec    replayRecord
}

// chunk is a run of lines: the entries to send and the lines rejected while
// reading, each with its line number.
type chunk struct {
	entries  []api.ReplayEntry
	rejected []api.ReplayOutcome
	lastLine int
	err      error // reading failed after these lines
}

func (r *replayer) run(ctx context.Context, in io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan chunk, 1)
	go r.read(ctx, in, chunks)
	for c := range chunks {
		if err := r.consume(ctx, c); err != nil {
			return err
		}
		if c.err != nil {
			return c.err
		}
		if r.rec.Stopped {
			return nil
		}
	}
	return nil
}

// read parses lines into chunks of at most replayChunkBytes of entries. Under
// --strict a rejected line ends its chunk and the reading.
func (r *replayer) read(ctx context.Context, in io.Reader, out chan<- chunk) {
	defer close(out)
	lines := jsonl.NewReader(in)
	var c chunk
	size := 0
	emit := func() bool {
		select {
		case out <- c:
			c, size = chunk{}, 0
			return true
		case <-ctx.Done():
			return false
		}
	}
	for line := 1; ; line++ {
		raw, err := lines.Next()
		if errors.Is(err, io.EOF) && len(raw) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, jsonl.ErrLineTooLong) {
			c.err = errs.Wrap(errs.Storage, err, "cannot read line %d", line)
			break
		}
		if len(bytes.TrimSpace(raw)) == 0 && !errors.Is(err, jsonl.ErrLineTooLong) {
			if err != nil {
				break // a blank last line
			}
			continue
		}
		var e api.ReplayEntry
		rejected := err
		if !errors.Is(err, jsonl.ErrLineTooLong) {
			e, rejected = jsonl.DecodeLine(raw)
		}
		if rejected != nil {
			c.rejected = append(c.rejected, api.ReplayOutcome{Line: line, Status: api.ReplayRejected,
				Code: string(errs.CodeOf(rejected)), Reason: rejected.Error()})
			c.lastLine = line
			if r.args.Strict {
				break
			}
			continue
		}
		e.Line = line
		enc, _ := json.Marshal(e)
		if size+len(enc) > replayChunkBytes && !emit() {
			return
		}
		c.entries = append(c.entries, e)
		c.lastLine = line
		size += len(enc) + 1
	}
	if len(c.entries) > 0 || len(c.rejected) > 0 || c.err != nil {
		emit()
	}
}

// consume sends a chunk's entries and counts, in line order, what became of
// every line in it.
func (r *replayer) consume(ctx context.Context, c chunk) error {
	outcomes := c.rejected
	if len(c.entries) > 0 {
		r.args.Entries = c.entries
		res, err := r.client.Replay(ctx, r.args)
		r.args.Entries = nil
		if err != nil {
			return err
		}
		r.args.BatchID, r.rec.BatchID = res.BatchID, res.BatchID
		outcomes = append(outcomes, res.Outcomes...)
	}
	slices.SortFunc(outcomes, func(a, b api.ReplayOutcome) int { return a.Line - b.Line })
	counted := c.lastLine
	for _, o := range outcomes {
		switch o.Status {
		case api.ReplayAccepted:
			r.rec.Summary.Accepted++
		case api.ReplayDuplicate:
			r.rec.Summary.Duplicates++
		case api.ReplaySkipped:
			r.skip(o)
		default:
			r.reject(o)
		}
		if r.rec.Stopped {
			counted = o.Line // what follows was not taken in
			break
		}
	}
	r.rec.Summary.Lines += countedLines(c, counted)
	return nil
}

// call sends a request without entries (the first, and the summary).
func (r *replayer) call(ctx context.Context) error {
	res, err := r.client.Replay(ctx, r.args)
	if err != nil {
		return err
	}
	r.args.BatchID, r.rec.BatchID = res.BatchID, res.BatchID
	return nil
}

// countedLines is how many of the chunk's lines up to last were entries or
// rejections (blank lines are not counted).
func countedLines(c chunk, last int) int {
	n := 0
	for _, e := range c.entries {
		if e.Line <= last {
			n++
		}
	}
	for _, o := range c.rejected {
		if o.Line <= last {
			n++
		}
	}
	return n
}

// skip notes a line left out on purpose (a wake) on stderr and counts it;
// it is no rejection, so the exit status and --strict ignore it.
func (r *replayer) skip(o api.ReplayOutcome) {
	r.rec.Summary.Skipped++
	if !r.a.JSON && !r.a.Quiet {
		fmt.Fprintf(r.a.Err, "%s: line %d: skipped: %s\n", r.a.Name(), o.Line, textsafe.Escape(o.Reason))
	}
}

// reject reports a rejected line on stderr and counts it.
func (r *replayer) reject(o api.ReplayOutcome) {
	o.Status = api.ReplayRejected
	r.rec.Summary.Rejected++
	r.rec.Rejections = append(r.rec.Rejections, o)
	if !r.a.JSON {
		// The reason may quote the line (a target, an id): escaped.
		fmt.Fprintf(r.a.Err, "%s: line %d: rejected (%s): %s\n", r.a.Name(), o.Line, o.Code, textsafe.Escape(o.Reason))
	}
	if r.args.Strict {
		r.rec.Stopped = true
	}
}

// openInput opens FILE, or standard input for -; size is -1 when unknown.
func openInput(a *app.App, name string) (io.Reader, int64, func(), error) {
	if name == "-" {
		return a.In, -1, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, nil, errs.Wrap(errs.Usage, err, "cannot read %s", name)
	}
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return f, size, func() { f.Close() }, nil
}

// countingReader moves the progress line on by the bytes read.
type countingReader struct {
	r        io.Reader
	progress *app.Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.progress.Add(int64(n))
	return n, err
}
