package gita

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/trust"
)

// Reader loads the registry of one gita directory. It is safe for concurrent use.
type Reader struct {
	dir string

	mu     sync.Mutex
	repos  parsed[[]row]
	groups parsed[[]Group]

	// What the files looked like at the last read, and when it was.
	stamps   [2]stamp
	lastRead time.Time
	// gen counts the parses that gave something new: an unchanged gen
	// means the files say what they said.
	gen uint64
	// watched is what Watched last built.
	watched watched

	// What git said of directories without .git, by path: asking it is a
	// process start, and the service loads the registry for every message.
	askedGit map[string]gitAnswer
	// isBare and now are git and the clock (tests replace them).
	isBare func(path string) (bool, string)
	now    func() time.Time
}

// gitAnswer is git's verdict on a directory and the directory's stamp when
// it was given; a changed stamp asks again.
type gitAnswer struct {
	at     stamp
	bare   bool
	reason string
}

// stamp is what stat says of a file; equal stamps mean an unchanged file only
// if the file's last change is well before the read that is being reused (see
// unchangedSince), because file times are coarse.
type stamp struct {
	exists      bool
	size        int64
	ino         uint64
	mtime, ctim unix.Timespec
}

func stampOf(path string) stamp {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return stamp{}
	}
	return stamp{exists: true, size: st.Size, ino: st.Ino, mtime: st.Mtim, ctim: st.Ctim}
}

// racyWindow is how long after a file's last change a read of it is not
// trusted to have seen that change (kernel file times move in coarse ticks),
// the rule git uses for its index ("racy git").
const racyWindow = 2 * time.Second

// unchangedSince reports whether the files are as they were at the last read
// and their last change was long enough before it.
func (rd *Reader) unchangedSince(now [2]stamp) bool {
	if rd.lastRead.IsZero() || now != rd.stamps {
		return false
	}
	for _, st := range now {
		if st.exists && time.Unix(st.ctim.Unix()).After(rd.lastRead.Add(-racyWindow)) {
			return false
		}
	}
	return true
}

// NewReader returns a Reader of the registry in dir (see Dir).
func NewReader(dir string) *Reader {
	return &Reader{dir: dir, isBare: isBare, now: time.Now}
}

// parsed remembers the last parse of one file. The files are re-read on every
// Load and compared byte for byte: an mtime can miss a same-size rewrite within
// one tick of the file system's clock.
type parsed[T any] struct {
	data []byte
	val  T
	err  error
	set  bool
}

// get returns the parse of data, and whether it was parsed anew.
func (p *parsed[T]) get(data []byte, parse func([]byte) (T, error)) (T, error, bool) {
	if p.set && bytes.Equal(p.data, data) {
		return p.val, p.err, false
	}
	p.val, p.err = parse(data)
	p.data, p.set = data, true
	return p.val, p.err, true
}

// row is a syntactically valid line of repos.csv, before the git check.
type row struct {
	repo Repo
	line int
}

// Load reads the registry as it is now. The git check of every path is redone
// each time, since a repository can vanish without repos.csv changing.
func (rd *Reader) Load() (*Registry, error) {
	reg, rows, groups, _, err := rd.read()
	if err != nil {
		return nil, err
	}
	rd.checkRepos(reg, rows, groups)
	return reg, nil
}

// recheckEvery is how long Watched keeps its git checks of the registered
// paths while the registry files stay as they were.
const recheckEvery = time.Second

// watched is a registry Watched built: the parse it came from (gen) and
// when its paths were checked.
type watched struct {
	reg     *Registry
	gen     uint64
	checked time.Time
}

// Watched is Load for a caller that reads the registry on every request (the
// service checks every send's address against it): the registry files are
// watched through what stat says of them (size, inode, times), and the git
// check of the registered paths, two stats each, is redone only when the
// files say something new, or after recheckEvery. So a repository
// registered or unregistered in gita (which rewrites repos.csv) is seen by
// the next call, a registry others can write is refused as Load refuses it,
// and a repository deleted behind gita's back is seen within recheckEvery.
// The Registry is shared by the calls that get it, never changed.
func (rd *Reader) Watched() (*Registry, error) {
	reg, rows, groups, gen, err := rd.read()
	if err != nil {
		return nil, err
	}
	now := rd.now()
	rd.mu.Lock()
	w := rd.watched
	rd.mu.Unlock()
	if w.reg != nil && w.gen == gen && !now.Before(w.checked) && now.Sub(w.checked) < recheckEvery {
		return w.reg, nil
	}
	rd.checkRepos(reg, rows, groups)
	rd.mu.Lock()
	// A slower call that read an older parse must not replace a newer one.
	if rd.watched.reg == nil || gen >= rd.watched.gen {
		rd.watched = watched{reg: reg, gen: gen, checked: now}
	}
	rd.mu.Unlock()
	return reg, nil
}

// read returns the registry's parsed rows and groups, reading the files again
// only when their stamps changed or are too recent to trust, with reg's file
// names filled in; gen is the parse's generation (see Reader.gen).
func (rd *Reader) read() (reg *Registry, rows []row, groups []Group, gen uint64, err error) {
	reg = &Registry{
		Dir:        rd.dir,
		ReposFile:  filepath.Join(rd.dir, ReposFileName),
		GroupsFile: filepath.Join(rd.dir, GroupsFileName),
	}
	stamps := [2]stamp{stampOf(reg.ReposFile), stampOf(reg.GroupsFile)}
	rd.mu.Lock()
	fresh := rd.repos.set && rd.groups.set && rd.unchangedSince(stamps)
	rows, rowsErr := rd.repos.val, rd.repos.err
	groups, groupsErr := rd.groups.val, rd.groups.err
	gen = rd.gen
	rd.mu.Unlock()
	if !fresh {
		// Stat before reading: a change after the stat shows in the next stat.
		readAt := rd.now()
		// The registry says which directory is which repo, so where
		// prompts and messages are typed: files another user could write
		// are refused.
		reposData, err := trust.ReadFile(reg.ReposFile, "gita registry")
		if errs.Is(err, errs.PermissionDeny) {
			return nil, nil, nil, 0, err
		}
		if err != nil {
			return nil, nil, nil, 0, missingOrUnreadable(rd.dir, reg.ReposFile, err)
		}
		groupsData, err := trust.ReadFile(reg.GroupsFile, "gita registry")
		if errors.Is(err, fs.ErrNotExist) {
			// gita creates groups.csv only when a group is made.
			groupsData, err = nil, nil
		}
		if errs.Is(err, errs.PermissionDeny) {
			return nil, nil, nil, 0, err
		}
		if err != nil {
			return nil, nil, nil, 0, unreadable(reg.GroupsFile, err)
		}
		rd.mu.Lock()
		var newRows, newGroups bool
		rows, rowsErr, newRows = rd.repos.get(reposData, func(b []byte) ([]row, error) { return parseRepos(reg.ReposFile, b) })
		groups, groupsErr, newGroups = rd.groups.get(groupsData, func(b []byte) ([]Group, error) { return parseGroups(reg.GroupsFile, b) })
		if newRows || newGroups {
			rd.gen++
		}
		gen = rd.gen
		rd.stamps, rd.lastRead = stamps, readAt
		rd.mu.Unlock()
	}
	if rowsErr != nil {
		return nil, nil, nil, 0, rowsErr
	}
	if groupsErr != nil {
		return nil, nil, nil, 0, groupsErr
	}
	return reg, rows, groups, gen, nil
}

// checkRepos fills reg from the parsed rows and groups, checking that each
// registered path is a git repository.
func (rd *Reader) checkRepos(reg *Registry, rows []row, groups []Group) {
	for _, g := range groups {
		g.Repos = slices.Clone(g.Repos)
		reg.Groups = append(reg.Groups, g)
	}
	for _, r := range rows {
		repo := r.repo
		repo.Flags = slices.Clone(repo.Flags)
		bare, reason := checkGit(repo.Path, rd.askGit)
		if reason != "" {
			reg.Unregistered = append(reg.Unregistered, Unregistered{Repo: repo, Line: r.line, Reason: reason})
			continue
		}
		repo.Bare = bare
		reg.Repos = append(reg.Repos, repo)
	}
}

func missingOrUnreadable(dir, file string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return unreadable(file, err)
	}
	if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
		return errs.New(errs.RegistryError, "gita registry directory %s does not exist", dir).
			WithHint("%s", registerHint)
	}
	return errs.New(errs.RegistryError, "gita registry %s does not exist", file).
		WithHint("%s", registerHint)
}

func unreadable(file string, err error) error {
	e := errs.New(errs.RegistryError, "cannot read gita registry %s: %s", file, describeErr(err))
	e.Err = err
	return e.WithHint("check that %s is a readable file", file)
}
