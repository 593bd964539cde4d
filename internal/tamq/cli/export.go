package cli

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	sharedcli "github.com/tmux-amq/tamq/internal/cli"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

type exportRecord struct {
	File     string `json:"file"`
	Exported int    `json:"exported"`
}

func newExportCmd(a *sharedcli.App) *cobra.Command {
	var f filterFlags
	cmd := &cobra.Command{
		Use:   "export [FILE|-]",
		Short: "Write messages, bodies included, as JSONL (one envelope per line)",
		Long: `Write the messages the filters match, oldest first, as JSONL: one complete
message envelope per line, body included (docs/jsonl.md names every field).
FILE is appended to (created 0600 when missing), so exports can accumulate in
one file: replaying it skips what it already replayed. Without FILE, or with -,
the lines go to standard output. A failed export leaves FILE as it was, and so
does an interrupted one (Ctrl-C or SIGTERM), which exits 130 (143 for SIGTERM).`,
		Example: `  tamq export history.jsonl
  tamq export --repo net-kingdom --since 30d - | gzip > nk.jsonl.gz`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"jsonl"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			filter, err := f.filter(a.Now())
			if err != nil {
				return err
			}
			file := "-"
			if len(args) == 1 {
				file = args[0]
			}
			db, ok, err := openHistory(cmd.Context(), a)
			if err != nil {
				return err
			}
			if ok {
				defer db.Close()
			}
			// From before the first byte is written: an interrupt stops the
			// export, which then cuts FILE back like a failed one.
			ctx, caught, stop := interruptible(cmd.Context())
			defer stop()
			var out io.Writer = a.Out
			var commit func(ok bool) error
			if file != "-" {
				if out, commit, err = appendTo(file); err != nil {
					return err
				}
			}
			n := 0
			if ok {
				n, err = export(ctx, a, db, filter, out)
			}
			sig := caught()
			if sig != 0 {
				err = nil // what the interrupt cut short is no failure of its own
			}
			if commit != nil {
				if cerr := commit(err == nil && sig == 0); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return err
			}
			if sig != 0 {
				// The shell's convention for a command ended by a signal.
				msg := fmt.Sprintf("%s: export interrupted by %s", a.Name(), unix.SignalName(sig))
				if file != "-" {
					msg += "; " + textsafe.Escape(file) + " left as it was"
				}
				fmt.Fprintln(a.Err, msg)
				return sharedcli.PassStatus(128 + int(sig))
			}
			if a.JSON && file != "-" {
				return a.PrintJSON(exportRecord{File: file, Exported: n})
			}
			a.Notef("exported %d messages to %s", n, displayName(file))
			return nil
		},
	}
	f.register(a, cmd)
	return cmd
}

func export(ctx context.Context, a *sharedcli.App, db *sql.DB, filter store.Filter, out io.Writer) (int, error) {
	var progress *sharedcli.Progress
	if a.ShowsProgress() {
		if total, err := store.Count(ctx, db, filter); err == nil && total > 1000 {
			progress = a.NewProgress(int64(total), "exporting", "msgs")
		}
	}
	defer progress.Done()
	w := bufio.NewWriterSize(out, 256<<10)
	n := 0
	err := store.ExportLines(ctx, db, filter, func(line []byte) error {
		w.Write(line)
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
		n++
		if n%1024 == 0 {
			progress.Set(int64(n))
		}
		return nil
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		return n, nil
	}
	// A store error keeps its code and hint; a failed write is storage's.
	var e *errs.Error
	if errors.As(err, &e) {
		return n, &errs.Error{Code: e.Code, Message: fmt.Sprintf("export stopped after %d messages: %s", n, e.Message), Hint: e.Hint, Err: err}
	}
	return n, errs.Wrap(errs.Storage, err, "export stopped after %d messages", n)
}

// interruptible returns a context cancelled by SIGINT or SIGTERM, which
// then no longer end the process, and caught, the signal that came (0
// before one did). stop restores the signals' default.
func interruptible(parent context.Context) (ctx context.Context, caught func() syscall.Signal, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var got atomic.Int32
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			got.Store(int32(s.(syscall.Signal)))
			cancel()
		case <-done:
		}
	}()
	stop = func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
	return ctx, func() syscall.Signal { return syscall.Signal(got.Load()) }, stop
}

// appendTo opens file for appending. commit(true) syncs it; commit(false)
// cuts it back to the size it had, so a failed export adds no partial lines.
func appendTo(file string) (io.Writer, func(ok bool) error, error) {
	_, statErr := os.Lstat(file)
	created := errors.Is(statErr, fs.ErrNotExist)
	f, err := os.OpenFile(file, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, errs.Wrap(errs.Storage, err, "cannot open %s for writing", file)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, errs.Wrap(errs.Storage, err, "cannot open %s for writing", file)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errs.New(errs.Usage, "%s is not a regular file", file)
	}
	start := fi.Size()
	// A file that does not end its last line (cut short, or written by
	// something else) gets the newline, so the first new line stands alone.
	if start > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, start-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, nil, errs.Wrap(errs.Storage, err, "cannot write %s", file)
			}
		}
	}
	commit := func(ok bool) error {
		if !ok {
			var err error
			if created {
				err = errors.Join(f.Close(), os.Remove(file))
			} else {
				err = errors.Join(f.Truncate(start), f.Close())
			}
			if err != nil {
				return errs.Wrap(errs.Storage, err, "cannot cut %s back to its %d bytes before the export", file, start)
			}
			return nil
		}
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return errs.Wrap(errs.Storage, err, "cannot write %s", file)
		}
		return nil
	}
	return f, commit, nil
}

func displayName(file string) string {
	if file == "-" {
		return "standard output"
	}
	return textsafe.Escape(file)
}
