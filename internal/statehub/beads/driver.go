// Package beads is the State Hub driver of beads (`bd`,
// github.com/steveyegge/beads), the tracker built for coding agents: each
// gita repo with a `.beads/` database at its root is a workplan, its
// issues are the tasks (mapping.go), read with `bd list --json` and
// changed with `bd update`, `bd close` and `bd comments add`
// (docs/trackers.md). bd has no event API and no revision, and each bd
// process costs about half a CPU-second: the driver runs bd for a repo only
// when the files of its database moved (stamp.go), and its change hints
// come from watching those files, not from bd.
package beads

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/trust"
)

// Kind is the driver's kind of State Hub.
const Kind = config.KindBeads

// TestedVersion is the bd the driver is tested with (`make
// test-trackers`); doctor says whether the one found is it.
const TestedVersion = "1.1.2"

// Options make a driver.
type Options struct {
	Settings config.Beads
	// Registry is gita's registry: its repos with a .beads/ are watched.
	Registry func() (*gita.Registry, error)
	Clock    clock.Clock
	// Home is bd's private HOME (a directory of the engine's state).
	Home string
	// PollEvery is how often Events looks at the databases' files.
	PollEvery time.Duration
}

// Driver is beads as a statehub.Hub.
type Driver struct {
	// Messages and checkpoints: beads has none of its own.
	statehub.NoMessages
	o   Options
	run *runner

	mu    sync.Mutex
	repos map[string]*repoCache // by gita slug
	// lastKey is the set of databases of the last look: one more or less
	// is a change.
	lastKey    string
	looked     bool
	watched    []statehub.Watched
	notWatched []statehub.Watched
}

// repoCache is what the last bd run read of one database, and the stamp
// of its files then.
type repoCache struct {
	path   string
	stamp  string
	issues []issue
}

// New makes a driver; it runs no bd until it looks.
func New(o Options) (*Driver, error) {
	if o.Clock == nil {
		o.Clock = clock.System
	}
	if o.PollEvery == 0 {
		o.PollEvery = time.Second
	}
	if o.Settings.Command == "" {
		o.Settings.Command = config.DefaultBeadsCommand
	}
	timeout := time.Duration(o.Settings.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = time.Duration(config.DefaultBeadsTimeoutSeconds) * time.Second
	}
	if o.Home == "" {
		// bd's own HOME, out of the user's: what it keeps there (its
		// user config, caches) is the engine's, not the person's bd's.
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, errs.Wrap(errs.ConfigInvalid, err, "beads: no cache directory for bd's home")
		}
		o.Home = filepath.Join(cache, "coordination-engine", "bd-home")
	}
	return &Driver{NoMessages: statehub.NoMessages{Tracker: "beads"}, o: o, run: &runner{command: o.Settings.Command, timeout: timeout, home: o.Home}, repos: map[string]*repoCache{}}, nil
}

// Kind names the driver.
func (d *Driver) Kind() string { return Kind }

// Offers: task bodies and task set; change hints from the databases'
// files; receipts stay in the engine's database (bd is no log of them).
func (d *Driver) Offers() statehub.Offers {
	return statehub.Offers{TaskBodies: true, TaskSet: true, Events: true, Receipts: "local"}
}

// Link is "": beads has no page for people.
func (d *Driver) Link(string) string { return "" }

// Runs counts the bd processes the driver started.
func (d *Driver) Runs() int64 { return d.run.runs.Load() }

// Report says which databases are watched and which repos are not, and
// why; Requests counts the bd processes.
func (d *Driver) Report() statehub.Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return statehub.Report{Kind: Kind, Watched: slices.Clone(d.watched), NotWatched: slices.Clone(d.notWatched), Requests: d.run.runs.Load()}
}

// database is one watched repo's database.
type database struct{ slug, path string }

// watch lists gita's repos that have a .beads/ database the engine may
// trust: a directory of the user's (or root's) that nobody else may write,
// in a repo directory nobody else may write (bd's files say what an agent
// is told to do). refused are the databases that are not.
func (d *Driver) watch() (dbs []database, refused []statehub.Watched, err error) {
	reg, err := d.o.Registry()
	if err != nil {
		return nil, nil, err
	}
	var watched, notWatched []statehub.Watched
	for _, r := range reg.Repos {
		dir := filepath.Join(r.Path, ".beads")
		fi, err := os.Lstat(dir)
		switch {
		case err != nil || !fi.IsDir():
			notWatched = append(notWatched, statehub.Watched{Repo: r.Name, Where: r.Path, Problem: "no .beads/ database (`bd init` there to track its work in beads)", Elsewhere: true})
			continue
		}
		f, err := trust.Open(dir, "the beads database")
		if err != nil {
			w := statehub.Watched{Repo: r.Name, Where: dir, Problem: err.Error()}
			notWatched, refused = append(notWatched, w), append(refused, w)
			continue
		}
		f.Close()
		dbs = append(dbs, database{slug: r.Name, path: r.Path})
		watched = append(watched, statehub.Watched{Repo: r.Name, Where: dir})
	}
	d.mu.Lock()
	d.watched, d.notWatched = watched, notWatched
	d.mu.Unlock()
	return dbs, refused, nil
}

// runnable says whether bd can be started at all, without starting it: a
// look at an unchanged tracker runs no bd, yet must say that bd is gone.
func (d *Driver) runnable() error { return d.run.startable() }

// Board reads every watched database whose files moved since the last
// look with one `bd list`, and keeps the others as they were read.
func (d *Driver) Board(ctx context.Context) (statehub.Board, error) {
	dbs, refused, err := d.watch()
	if err != nil {
		return statehub.Board{}, err
	}
	if len(dbs) == 0 && len(refused) > 0 {
		return statehub.Board{}, errs.New(errs.PermissionDeny, "beads: every database is refused: %s", refused[0].Problem)
	}
	if err := d.runnable(); err != nil {
		return statehub.Board{}, err
	}
	changed := false
	for _, db := range dbs {
		moved, err := d.read(ctx, db)
		if err != nil {
			return statehub.Board{}, err
		}
		changed = changed || moved
	}
	key := ""
	for _, db := range dbs {
		key += db.slug + "\x00"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.looked || key != d.lastKey {
		changed = true
	}
	d.looked, d.lastKey = true, key
	for slug := range d.repos {
		if !strings.Contains("\x00"+key, "\x00"+slug+"\x00") {
			delete(d.repos, slug)
		}
	}
	b := d.build(dbs)
	b.Changed = changed
	return b, nil
}

// read runs `bd list` for db when its files moved since the last read (or
// it was never read), and says whether anything it read changed.
func (d *Driver) read(ctx context.Context, db database) (bool, error) {
	stamp, err := stampOf(db.path)
	if err != nil {
		return false, errs.Wrap(errs.Unavailable, err, "beads: cannot read the database of %s", db.slug)
	}
	d.mu.Lock()
	rc := d.repos[db.slug]
	d.mu.Unlock()
	if rc != nil && rc.path == db.path && rc.stamp == stamp {
		return false, nil
	}
	// The stamp the read answers for is taken before bd reads, with no
	// other bd of the engine's on the database: a person's write that
	// lands while bd reads moves the files after it, and the next look
	// reads again. (A stamp taken after the read would take such a write
	// for read, and lose it.)
	// Two looks at once (a hint's and the poll's) wait here for each
	// other; the second finds what the first read and runs no bd.
	unlock := d.run.lock(db.path)
	stamp, err = stampOf(db.path)
	d.mu.Lock()
	rc = d.repos[db.slug]
	d.mu.Unlock()
	if err == nil && rc != nil && rc.path == db.path && rc.stamp == stamp {
		unlock()
		return false, nil
	}
	var out []byte
	if err == nil {
		out, err = d.run.runLocked(ctx, db.path, "list", "--json", "--all", "--limit", "0")
	}
	unlock()
	if err != nil {
		return false, err
	}
	var issues []issue
	if err := json.Unmarshal(out, &issues); err != nil {
		return false, errs.Wrap(errs.Internal, err, "beads: bd list in %s printed what is not a list of issues", db.slug)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	before := ""
	if rc != nil {
		before = issuesKey(rc.issues)
	}
	d.repos[db.slug] = &repoCache{path: db.path, stamp: stamp, issues: issues}
	return rc == nil || issuesKey(issues) != before, nil
}

// issuesKey is what the engine reads of a database's issues, to tell a
// read that changed something from one that found the same.
func issuesKey(is []issue) string {
	b, _ := json.Marshal(is)
	return string(b)
}

// build maps the databases' issues onto workplans; mu is held.
func (d *Driver) build(dbs []database) statehub.Board {
	b := statehub.Board{Outside: map[string]string{}}
	all := map[string]bool{}
	owners := map[string]string{} // bd id → the slug whose database holds it
	for _, db := range dbs {
		if rc := d.repos[db.slug]; rc != nil {
			for _, is := range rc.issues {
				all[TaskID(db.slug, is.ID)] = true
				owners[is.ID] = db.slug
			}
		}
	}
	owner := func(bdID string) string { return owners[bdID] }
	for _, db := range dbs {
		rc := d.repos[db.slug]
		if rc == nil {
			continue
		}
		var tasks []contract.Task
		for _, is := range rc.issues {
			if !validID(is.ID) {
				b.Invalid = append(b.Invalid, statehub.Invalid{Kind: "task", ID: textsafe.Escape(is.ID), Reason: "not an id bd makes"})
				continue
			}
			t := task(is, db.slug, owner, d.o.Settings)
			for _, dep := range t.DependsOn {
				if !all[dep] {
					// Another repo's work this database links to, which no
					// watched database holds: a person's to do, waited for.
					b.Outside[dep] = "todo"
				}
			}
			tasks = append(tasks, t)
		}
		slices.SortFunc(tasks, func(x, y contract.Task) int { return strings.Compare(x.ID, y.ID) })
		b.Workplans = append(b.Workplans, contract.Workplan{ID: "beads:" + db.slug, Repo: db.slug, Status: "active",
			Revision: workplanRevision(tasks), Tasks: tasks, InterventionNotes: []contract.Note{}})
	}
	return b
}

// located is the database a task id names, trusted as a look trusts it.
func (d *Driver) located(id string) (database, string, error) {
	slug, bdID, err := ParseTaskID(id)
	if err != nil {
		return database{}, "", err
	}
	dbs, refused, err := d.watch()
	if err != nil {
		return database{}, "", err
	}
	for _, db := range dbs {
		if db.slug == slug {
			return db, bdID, nil
		}
	}
	for _, w := range refused {
		if w.Repo == slug {
			return database{}, "", errs.New(errs.PermissionDeny, "beads: %s", w.Problem)
		}
	}
	return database{}, "", errs.New(errs.NotFound, "beads: no database of %s holds task %s", textsafe.Escape(slug), textsafe.Escape(id))
}

// known says whether bdID is an issue of db: the last read's answer,
// else bd's.
func (d *Driver) known(ctx context.Context, db database, bdID string) error {
	d.mu.Lock()
	rc := d.repos[db.slug]
	d.mu.Unlock()
	if rc != nil && slices.ContainsFunc(rc.issues, func(is issue) bool { return is.ID == bdID }) {
		return nil
	}
	_, err := d.show(ctx, db, bdID)
	return err
}

// show is one issue as `bd show --json` prints it.
func (d *Driver) show(ctx context.Context, db database, bdID string) (issue, error) {
	out, err := d.run.run(ctx, db.path, "show", bdID, "--json")
	if err != nil {
		return issue{}, err
	}
	var list []issue
	if err := json.Unmarshal(out, &list); err != nil {
		var one issue
		if err := json.Unmarshal(out, &one); err != nil {
			return issue{}, errs.Wrap(errs.Internal, err, "beads: bd show %s printed what is not an issue", bdID)
		}
		list = []issue{one}
	}
	for _, is := range list {
		if is.ID == bdID {
			return is, nil
		}
	}
	return issue{}, errs.New(errs.NotFound, "beads: no issue %s in the database of %s", bdID, db.slug)
}

// SetTask states a task's status as its agent gave it: in_progress and
// blocked through `bd update --status` (the note as a comment), done
// through `bd close` with the note as the reason. Nothing claims the issue
// in bd (`--claim` is not atomic across agents): the engine's lease is the
// one claim.
func (d *Driver) SetTask(ctx context.Context, id string, u contract.TaskUpdate) error {
	db, bdID, err := d.located(id)
	if err != nil {
		return err
	}
	if err := d.runnable(); err != nil {
		return err
	}
	if err := d.known(ctx, db, bdID); err != nil {
		return err
	}
	switch u.Status {
	case "in_progress", "blocked":
		if _, err := d.run.run(ctx, db.path, "update", bdID, "--status", u.Status); err != nil {
			return err
		}
		if u.Note != "" {
			_, err = d.run.run(ctx, db.path, "comments", "add", bdID, u.Note)
		}
		return err
	case "done":
		reason := u.Note
		if reason == "" {
			reason = "done (coordination-engine)"
		}
		_, err := d.run.run(ctx, db.path, "close", bdID, "--reason", reason)
		return err
	}
	return errs.New(errs.BadRequest, "beads: an agent may set in_progress, blocked or done, not %q", textsafe.Escape(u.Status))
}

// TaskBody is an issue's description as bd has it now, cut to MaxTaskBody.
func (d *Driver) TaskBody(ctx context.Context, id string) (statehub.TaskBody, error) {
	db, bdID, err := d.located(id)
	if err != nil {
		return statehub.TaskBody{}, err
	}
	is, err := d.show(ctx, db, bdID)
	if err != nil {
		return statehub.TaskBody{}, err
	}
	body := is.Description
	if len(body) > statehub.MaxTaskBody {
		body = strings.ToValidUTF8(body[:statehub.MaxTaskBody], "")
	}
	return statehub.TaskBody{ID: id, Title: is.Title, Repo: db.slug, Status: status(is.Status), Body: body}, nil
}

// Events hints at a change whenever the files of a watched database move
// (looked at every PollEvery, a stat of each file: no bd process), until
// ctx ends.
func (d *Driver) Events(ctx context.Context, onConnected, onEvent func()) error {
	last := map[string]string{}
	poll := func() bool {
		dbs, _, err := d.watch()
		if err != nil {
			return false
		}
		moved := len(dbs) != len(last)
		seen := map[string]string{}
		for _, db := range dbs {
			s, err := stampOf(db.path)
			if err != nil {
				continue
			}
			seen[db.slug] = s
			if last[db.slug] != s {
				moved = true
			}
		}
		last = seen
		return moved
	}
	poll()
	onConnected()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.o.Clock.After(d.o.PollEvery):
		}
		if poll() {
			onEvent()
		}
	}
}

// PostProgress keeps receipts local: beads is not a log of them.
func (d *Driver) PostProgress(context.Context, []contract.Receipt) (int, error) { return 0, nil }

// Probe says whether bd can be started, without starting it: status asks
// at every call, and each bd costs half a CPU-second (doctor asks bd its
// version).
func (d *Driver) Probe(context.Context, time.Duration) error {
	return d.runnable()
}

// CheckAccess reads every watched database once, for doctor.
func (d *Driver) CheckAccess(ctx context.Context) error {
	_, err := d.Board(ctx)
	return err
}

// Version is the version bd reports of itself ("1.1.2").
func (d *Driver) Version(ctx context.Context) (string, error) {
	if err := d.runnable(); err != nil {
		return "", err
	}
	out, err := d.run.run(ctx, d.o.Home, "version")
	if err != nil {
		return "", err
	}
	return parseVersion(string(out))
}

// parseVersion reads "bd version 1.1.2 (…)" and the like.
func parseVersion(out string) (string, error) {
	for _, f := range strings.Fields(out) {
		f = strings.TrimPrefix(f, "v")
		if len(f) > 0 && f[0] >= '0' && f[0] <= '9' && strings.Count(f, ".") >= 1 {
			return strings.TrimRight(f, ",;:"), nil
		}
	}
	return "", errs.New(errs.Internal, "beads: bd version printed no version: %q", textsafe.Escape(strings.TrimSpace(out)))
}

// Supported says whether version is one the driver reads: bd 1.x, whose
// JSON the driver is tested with (TestedVersion).
func Supported(version string) bool {
	return strings.HasPrefix(version, "1.")
}

var _ statehub.Hub = (*Driver)(nil)
