package cli

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

type exportRecord struct {
	File     string `json:"file"`
	Exported int    `json:"exported"`
}

func newExportCmd(a *app.App) *cobra.Command {
	var f filterFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "export [FILE|-]",
		Short: "Write messages, bodies included, as JSONL (one envelope per line)",
		Long: `Write the messages the filters match, oldest first, as JSONL: one complete
message envelope per line, body included (docs/jsonl.md names every field).
FILE is appended to (created 0600 when missing), so exports can accumulate in
one file: replaying it skips what it already replayed. Without FILE, or with -,
the lines go to standard output.

An export holds every message body, so FILE must be the user's alone: a
symbolic link is refused (never followed), and so is an existing file that is
not a regular file owned by the user with no group or other permissions. A new
FILE is not created in a directory other users can write to (such as /tmp)
unless --force is given. A failed export leaves FILE as it was, and so
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
			if err := scopeToCaller(cmd.Context(), a, &filter); err != nil {
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
			var dest *os.File // FILE, unless the export goes to stdout
			var commit func(ok bool) error
			if file != "-" {
				if dest, commit, err = appendTo(file, force); err != nil {
					return err
				}
				out = dest
			}
			n := 0
			if ok {
				n, err = export(ctx, a, db, filter, out)
			}
			if dest != nil && err == nil {
				// Durable before it counts as done, and while an interrupt
				// still cuts it back: the sync of a large export is where
				// most of its time goes.
				err = syncExport(dest, file)
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
				return app.PassStatus(128 + int(sig))
			}
			if a.JSON && file != "-" {
				return a.PrintJSON(exportRecord{File: file, Exported: n})
			}
			a.Notef("exported %d messages to %s", n, displayName(file))
			return nil
		},
	}
	f.register(a, cmd)
	cmd.Flags().BoolVar(&force, "force", false, "create FILE even in a directory other users can write to, such as /tmp")
	return cmd
}

func export(ctx context.Context, a *app.App, db *sql.DB, filter store.Filter, out io.Writer) (int, error) {
	var progress *app.Progress
	if app.ShowsProgress(a) {
		if total, err := store.Count(ctx, db, filter); err == nil && total > 1000 {
			progress = app.NewProgress(a, int64(total), "exporting", "msgs")
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

// appendTo opens file for appending, refusing every place an export should
// not be written (see openExport). commit(true) closes it (synced before, by
// syncExport); commit(false) cuts it back to the size it had, or removes it
// when it created it, so a failed export adds no partial lines.
func appendTo(file string, force bool) (*os.File, func(ok bool) error, error) {
	f, dir, created, err := openExport(file, force)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		unix.Close(dir)
		return nil, nil, errs.Wrap(errs.Storage, err, "cannot open %s for writing", file)
	}
	start := fi.Size()
	// A file that does not end its last line (cut short, or written by
	// something else) gets the newline, so the first new line stands alone.
	if start > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, start-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				unix.Close(dir)
				return nil, nil, errs.Wrap(errs.Storage, err, "cannot write %s", file)
			}
		}
	}
	commit := func(ok bool) error {
		defer unix.Close(dir)
		if !ok {
			var err error
			if created {
				err = errors.Join(removeCreated(dir, filepath.Base(file), f), f.Close())
			} else {
				err = errors.Join(f.Truncate(start), f.Close())
			}
			if err != nil {
				return errs.Wrap(errs.Storage, err, "cannot cut %s back to its %d bytes before the export", file, start)
			}
			return nil
		}
		if err := f.Close(); err != nil {
			return errs.Wrap(errs.Storage, err, "cannot write %s", file)
		}
		return nil
	}
	return f, commit, nil
}

// syncExport makes what an export wrote to file durable.
func syncExport(f *os.File, file string) error {
	if err := f.Sync(); err != nil {
		return errs.Wrap(errs.Storage, err, "cannot write %s", file)
	}
	return nil
}

// openExport opens file to append an export to it. An export holds every
// message body, so it is written only into a file that is the user's alone:
//
//   - a symbolic link at file is refused, never followed (it could point at
//     any file the user can write);
//   - an existing file must be a regular file owned by the user, with no
//     group or other permission bits;
//   - a new file is created 0600, O_EXCL, and not in a directory other users
//     can write to (such as /tmp: they could take the name first, or see it
//     come and go) unless force is set.
//
// The checks are made on what is written to, not on a name looked up again
// later: the directory is opened once and the file is opened in it with
// O_NOFOLLOW (O_EXCL when new), then checked through its descriptor. So a
// link or another file put at the name between the check and the open is
// never written to: the open fails or the check sees it. What remains: the
// directory's own path is resolved once when it is opened, following any
// links in it (they are the user's choice of path); and removing a file the
// export created after a failure goes by name, so in a directory others can
// write to without the sticky bit (only with force) another user could swap
// the name just before it is removed (removeCreated checks it is still ours
// first, which narrows that to the instant between the check and the unlink).
//
// It returns the file, the directory's descriptor (kept for removeCreated;
// the caller closes it) and whether the file was created.
func openExport(file string, force bool) (f *os.File, dir int, created bool, err error) {
	dirName, base := filepath.Dir(file), filepath.Base(file)
	dir, err = unix.Open(dirName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, false, errs.Wrap(errs.Storage, err, "cannot open %s for writing", file)
	}
	fail := func(err error) (*os.File, int, bool, error) {
		unix.Close(dir)
		return nil, -1, false, err
	}
	var st unix.Stat_t
	err = unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		var dst unix.Stat_t
		if err := unix.Fstat(dir, &dst); err != nil {
			return fail(errs.Wrap(errs.Storage, err, "cannot open %s for writing", file))
		}
		if dst.Mode&0o002 != 0 && !force {
			return fail(errs.New(errs.PermissionDeny,
				"refusing to create %s: its directory %s is writable by other users (mode %o), and an export holds every message body",
				file, dirName, dst.Mode&0o7777).
				WithHint("export into a directory of your own, or pass --force to create it there anyway"))
		}
		// O_EXCL: if anything (a link included) took the name since the
		// check, the create fails instead of writing to it.
		fd, err := unix.Openat(dir, base, unix.O_RDWR|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			return fail(errs.New(errs.Conflict, "%s appeared while the export was creating it; it was not written to", file).
				WithHint("look at what is at %s, then export again", file))
		}
		if err != nil {
			return fail(errs.Wrap(errs.Storage, err, "cannot create %s", file))
		}
		return os.NewFile(uintptr(fd), file), dir, true, nil
	case err != nil:
		return fail(errs.Wrap(errs.Storage, err, "cannot open %s for writing", file))
	}
	if err := checkExisting(file, &st); err != nil {
		return fail(err)
	}
	// O_NONBLOCK: should a FIFO or device be put at the name after the
	// check, the open must not wait on it (the check below refuses it); it
	// changes nothing for a regular file.
	fd, err := unix.Openat(dir, base, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return fail(symlinkRefused(file))
	}
	if err != nil {
		return fail(errs.Wrap(errs.Storage, err, "cannot open %s for writing", file))
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fail(errs.Wrap(errs.Storage, err, "cannot open %s for writing", file))
	}
	if err := checkExisting(file, &st); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	return os.NewFile(uintptr(fd), file), dir, false, nil
}

// checkExisting says why an existing file may not take an export, or nil.
func checkExisting(file string, st *unix.Stat_t) error {
	uid := uint32(os.Getuid())
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return symlinkRefused(file)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errs.New(errs.Usage, "%s is not a regular file", file)
	case st.Uid != uid:
		return errs.New(errs.PermissionDeny, "refusing to append to %s: it is owned by uid %d, not by you (uid %d)", file, st.Uid, uid).
			WithHint("export to a file of your own (a new name is created 0600)")
	case st.Mode&0o077 != 0:
		return errs.New(errs.PermissionDeny,
			"refusing to append to %s: other users may read or write it (mode %o), and an export holds every message body",
			file, st.Mode&0o7777).
			WithHint("make it private first (chmod 600 %s), or export to a new file", file)
	}
	return nil
}

func symlinkRefused(file string) error {
	return errs.New(errs.PermissionDeny, "refusing to write %s: it is a symbolic link, which export never follows", file).
		WithHint("name the file it points to, if that is where the export should go")
}

// removeCreated removes the file the export created, unless something else
// has taken its name meanwhile.
func removeCreated(dir int, base string, f *os.File) error {
	var named, ours unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &ours); err != nil {
		return err
	}
	if err := unix.Fstatat(dir, base, &named, unix.AT_SYMLINK_NOFOLLOW); err != nil || named.Dev != ours.Dev || named.Ino != ours.Ino {
		return nil // gone, or no longer ours: nothing of the export is left there
	}
	return unix.Unlinkat(dir, base, 0)
}

func displayName(file string) string {
	if file == "-" {
		return "standard output"
	}
	return textsafe.Escape(file)
}
