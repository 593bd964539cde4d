package github

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	gogh "github.com/google/go-github/v89/github"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// A look reads each watched repository's labelled issues, page by page,
// each page conditional on the ETag of the same page last time: when
// nothing changed every request is a 304, which GitHub does not count,
// and the board of the last look is answered as it was. Up to 100 labelled
// issues, that is one request per repository.
//
// The list is newest first, so a new task changes the first page, whose
// answer carries fresh Link headers: a 304 carries none, so a page held as
// the last is the last until a page before it changes. The one change no
// held page shows is a label put on an issue older than every labelled
// one while the last page is full: each refresh look (every refreshLooks)
// also asks for the page after a full last one, so that it is seen within
// a few minutes.
//
// The blockers of an issue (GitHub's issue dependencies) are read when the
// issue's entry in the list changed (its dependency summary counts its
// blockers, open and all), and on each refresh look, since a blocker
// swapped for another between two looks changes neither count.

// perPage is the most GitHub gives in one page.
const perPage = 100

// refreshLooks is how many looks pass between two refresh looks (20 at
// the default poll interval of 15 s: five minutes). Their extra requests
// are conditional too, so free when nothing changed.
const refreshLooks = 20

// lookState is what the looks keep between them.
type lookState struct {
	repos   map[string]*repoCache // by "owner/name"
	watched string                // the watched set of the last look, as one string
	board   *statehub.Board       // the last look's board
	looks   int
}

// repoCache is what the last looks read of one repository.
type repoCache struct {
	pages []page
	deps  map[int]*depCache // by issue number
}

// page is one page of a list as GitHub last answered it.
type page struct {
	etag   string
	issues []*gogh.Issue
	next   int // the next page's number from its Link header; 0: the last
	// afterETag is the ETag of the empty page after the last one, as a
	// refresh look last found it: the next probe is a free 304 too.
	afterETag string
}

// depCache is an issue's blocker list as last read, and the issue's entry
// in the list it was read for.
type depCache struct {
	pages []page
	entry string
}

// watchedRepo is a repository the look reads, as which gita repo.
type watchedRepo struct{ fullName, slug, path string }

// Board reads GitHub's issues as workplans: one per watched repository.
func (d *Driver) Board(ctx context.Context) (statehub.Board, error) {
	d.lookMu.Lock()
	defer d.lookMu.Unlock()
	s := &d.look
	if s.repos == nil {
		s.repos = map[string]*repoCache{}
	}
	repos, err := d.watch(ctx)
	if err != nil {
		return statehub.Board{}, err
	}
	s.looks++
	refresh := s.looks%refreshLooks == 0
	key := watchKey(repos)
	changed := s.board == nil || key != s.watched
	var problems []statehub.Watched
	var read []watchedRepo
	for _, w := range repos {
		rc := s.repos[w.fullName]
		if rc == nil {
			rc = &repoCache{deps: map[int]*depCache{}}
			s.repos[w.fullName] = rc
		}
		ch, err := d.readRepo(ctx, w, rc, refresh)
		switch {
		case err == nil:
			changed = changed || ch
			read = append(read, w)
		case repoProblem(err):
			// This repository cannot be read (gone, no access, issues
			// off): said in status and doctor, and its tasks are not on
			// the board; the others are read.
			problems = append(problems, statehub.Watched{Repo: w.slug, Where: w.fullName, Link: d.Link(w.fullName), Problem: err.Error()})
			if len(rc.pages) > 0 || s.board == nil {
				changed = true
			}
			delete(s.repos, w.fullName)
		default:
			return statehub.Board{}, err
		}
	}
	for name := range s.repos {
		if !slices.ContainsFunc(repos, func(w watchedRepo) bool { return w.fullName == name }) {
			delete(s.repos, name) // no longer watched: its cache goes
		}
	}
	d.noteProblems(problems)
	s.watched = key
	if !changed {
		b := *s.board
		b.Changed = false
		return b, nil
	}
	b := d.build(read)
	s.board = &b
	return b, nil
}

// repoProblem says whether a failed read is the repository's own: GitHub
// has no such repository for the token (404), refuses it (403), or has its
// issues turned off (410). Anything else (a refused token, a rate limit,
// an outage) fails the whole look.
func repoProblem(err error) bool {
	return errs.Is(err, errs.NotFound) || errs.Is(err, errs.Unsupported) || errors.Is(err, errForbidden)
}

func watchKey(repos []watchedRepo) string {
	var b strings.Builder
	for _, w := range repos {
		b.WriteString(w.fullName + "=" + w.slug + "\x00")
	}
	return b.String()
}

// readRepo reads a repository's labelled issues and the blockers of those
// that have some; it says whether anything changed.
func (d *Driver) readRepo(ctx context.Context, w watchedRepo, rc *repoCache, refresh bool) (bool, error) {
	owner, name, _ := config.ParseGitHubRepo(w.fullName)
	opts := &gogh.IssueListByRepoOptions{Labels: []string{d.o.Settings.Label}, State: "all", Sort: "created", Direction: "desc"}
	opts.ListOptions.PerPage = perPage
	pages, changed, err := d.readPages(ctx, rc.pages, refresh, "read the issues of "+w.fullName, func(ctx context.Context, n int) ([]*gogh.Issue, *gogh.Response, error) {
		o := *opts
		o.ListOptions.Page = n
		return d.gh.Issues.ListByRepo(ctx, owner, name, &o)
	})
	if err != nil {
		return false, err
	}
	rc.pages = pages
	seen := map[int]bool{}
	for _, p := range pages {
		for _, is := range p.issues {
			if !isTask(is, d.o.Settings.Label) {
				continue
			}
			n := is.GetNumber()
			seen[n] = true
			dc := rc.deps[n]
			sum := is.GetIssueDependenciesSummary()
			if sum.GetTotalBlockedBy() == 0 {
				if dc != nil {
					delete(rc.deps, n)
					changed = true
				}
				continue
			}
			entry := entryOf(is)
			if dc != nil && dc.entry == entry && !refresh {
				continue
			}
			if dc == nil {
				dc = &depCache{}
				rc.deps[n] = dc
			}
			dpages, dchanged, err := d.readPages(ctx, dc.pages, refresh, "read the blockers of "+TaskID(w.fullName, n), func(ctx context.Context, page int) ([]*gogh.Issue, *gogh.Response, error) {
				return d.gh.Issues.ListBlockedBy(ctx, owner, name, int64(n), &gogh.ListOptions{Page: page, PerPage: perPage})
			})
			if err != nil {
				return false, err
			}
			dc.pages, dc.entry = dpages, entry
			changed = changed || dchanged
		}
	}
	for n := range rc.deps {
		if !seen[n] {
			delete(rc.deps, n)
		}
	}
	return changed, nil
}

// entryOf is what of an issue's entry in the list tells its blockers may
// have changed: when it was updated and its dependency counts.
func entryOf(is *gogh.Issue) string {
	s := is.GetIssueDependenciesSummary()
	return is.GetUpdatedAt().String() + "/" + strconv.Itoa(s.GetBlockedBy()) + "/" + strconv.Itoa(s.GetTotalBlockedBy())
}

// readPages reads a paginated list, each page conditional on the ETag of
// the page held from last time, following the Link headers; a 304 keeps
// the page held and its next page. probe also asks for the page after a
// full last one (see the top of this file).
func (d *Driver) readPages(ctx context.Context, held []page, probe bool, what string,
	list func(ctx context.Context, n int) ([]*gogh.Issue, *gogh.Response, error)) ([]page, bool, error) {
	var out []page
	changed := false
	for n, i := 1, 0; ; i++ {
		var old page
		switch {
		case i < len(held):
			old = held[i]
		case i > 0 && i == len(held):
			old.etag = held[i-1].afterETag // a probe past the last page
		}
		var issues []*gogh.Issue
		resp, err := d.call(withETag(ctx, old.etag), what, func(ctx context.Context) (*gogh.Response, error) {
			is, resp, err := list(ctx, n)
			issues = is
			return resp, err
		})
		var p page
		switch {
		case notModified(err) && old.etag != "":
			p = old
		case err != nil:
			return nil, false, err
		default:
			p = page{etag: resp.Header.Get("ETag"), issues: issues, next: resp.NextPage}
		}
		if len(p.issues) == 0 && i > 0 {
			// Past the last entry (a probe, or a list that shrank): the
			// page before is the last, and this one's ETag is kept for the
			// next probe.
			out[i-1].next, out[i-1].afterETag = 0, p.etag
			break
		}
		if p.etag != old.etag || i >= len(held) {
			changed = true
		}
		out = append(out, p)
		next := p.next
		if next == 0 && probe && len(p.issues) == perPage {
			next = n + 1
		}
		if next <= n {
			break
		}
		n = next
	}
	if len(out) != len(held) {
		changed = true
	}
	return out, changed, nil
}

// build makes the board of the repositories read.
func (d *Driver) build(read []watchedRepo) statehub.Board {
	g := d.o.Settings
	b := statehub.Board{Changed: true, Outside: map[string]string{}}
	taskIDs := map[string]bool{}
	type pending struct {
		is       *gogh.Issue
		w        watchedRepo
		blockers []string
	}
	var all [][]pending
	for _, w := range read {
		rc := d.look.repos[w.fullName]
		var ps []pending
	issues:
		for _, p := range rc.pages {
			for _, is := range p.issues {
				if !isTask(is, g.Label) {
					continue
				}
				var blockers []string
				if dc := rc.deps[is.GetNumber()]; dc != nil {
					for _, dp := range dc.pages {
						for _, bl := range dp.issues {
							repo := repoOf(bl)
							if repo == "" || bl.GetNumber() < 1 {
								b.Invalid = append(b.Invalid, statehub.Invalid{Kind: "task", ID: TaskID(w.fullName, is.GetNumber()),
									Reason: "GitHub lists a blocker of it whose repository cannot be read"})
								continue issues
							}
							id := TaskID(repo, bl.GetNumber())
							blockers = append(blockers, id)
							b.Outside[id] = outsideStatus(bl)
						}
					}
				}
				slices.Sort(blockers)
				blockers = slices.Compact(blockers)
				taskIDs[TaskID(w.fullName, is.GetNumber())] = true
				ps = append(ps, pending{is: is, w: w, blockers: blockers})
			}
		}
		all = append(all, ps)
	}
	for i, w := range read {
		wp := contract.Workplan{ID: w.fullName, Repo: w.slug, Status: "active", Tasks: []contract.Task{}}
		for _, p := range all[i] {
			wp.Tasks = append(wp.Tasks, task(p.is, w.fullName, w.slug, p.blockers, g))
		}
		slices.SortFunc(wp.Tasks, func(a, b contract.Task) int { return strings.Compare(a.ID, b.ID) })
		wp.Revision = workplanRevision(wp.Tasks)
		b.Workplans = append(b.Workplans, wp)
	}
	for id := range b.Outside {
		if taskIDs[id] {
			delete(b.Outside, id) // a task: its own status counts
		}
	}
	return b
}

// repoOf is the "owner/name" of the repository an issue is in, from its
// repository_url (".../repos/owner/name"), else its html_url.
func repoOf(is *gogh.Issue) string {
	for _, raw := range []string{is.GetRepositoryURL(), is.GetHTMLURL()} {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		path := u.Path
		if _, rest, ok := strings.Cut(path, "/repos/"); ok {
			path = rest
		} else if _, rest, ok := strings.Cut(path, "/issues/"); ok {
			path = strings.TrimSuffix(u.Path, "/issues/"+rest)
		}
		path = strings.Trim(path, "/")
		if _, _, err := config.ParseGitHubRepo(path); err == nil {
			return path
		}
	}
	return ""
}

// watch is the repositories a look reads: each gita repo whose origin is a
// GitHub repository of the API's host, or that [statehub.github] repos
// maps, once; the others are said in status and doctor, with why.
func (d *Driver) watch(ctx context.Context) ([]watchedRepo, error) {
	reg, err := d.o.Registry()
	if err != nil {
		return nil, err
	}
	var watched []watchedRepo
	var notWatched []statehub.Watched
	bySlug := map[string]bool{}
	for _, slug := range reg.Slugs() {
		r, _ := reg.Lookup(slug)
		bySlug[slug] = true
		if full, ok := d.o.Settings.Repos[slug]; ok {
			watched = append(watched, watchedRepo{fullName: full, slug: slug, path: r.Path})
			continue
		}
		origin, problem := d.remotes.origin(ctx, r.Path)
		full := ParseRemote(origin, d.hosts)
		switch {
		case problem != "":
			notWatched = append(notWatched, statehub.Watched{Repo: slug, Problem: problem})
		case origin == "":
			notWatched = append(notWatched, statehub.Watched{Repo: slug, Elsewhere: true, Problem: "it has no origin remote (name one in [statehub.github] repos to watch it)"})
		case full == "":
			notWatched = append(notWatched, statehub.Watched{Repo: slug, Elsewhere: true,
				Problem: "its origin remote is not a repository on " + strings.Join(d.hosts, " or ") + " (name one in [statehub.github] repos to watch it)"})
		default:
			watched = append(watched, watchedRepo{fullName: full, slug: slug, path: r.Path})
		}
	}
	for slug, full := range d.o.Settings.Repos {
		if !bySlug[slug] {
			notWatched = append(notWatched, statehub.Watched{Repo: slug, Where: full, Problem: "named in [statehub.github] repos but not registered with gita"})
		}
	}
	// A GitHub repository is one workplan, of one repo: two clones of it
	// would each take the other's tasks.
	count := map[string][]string{}
	for _, w := range watched {
		count[strings.ToLower(w.fullName)] = append(count[strings.ToLower(w.fullName)], w.slug)
	}
	watched = slices.DeleteFunc(watched, func(w watchedRepo) bool {
		slugs := count[strings.ToLower(w.fullName)]
		if len(slugs) < 2 {
			return false
		}
		notWatched = append(notWatched, statehub.Watched{Repo: w.slug, Where: w.fullName,
			Problem: w.fullName + " is the repository of " + strings.Join(slugs, " and ") + "; say which one takes its issues in [statehub.github] repos"})
		return true
	})
	slices.SortFunc(notWatched, func(a, b statehub.Watched) int { return strings.Compare(a.Repo, b.Repo) })
	report := make([]statehub.Watched, 0, len(watched))
	for _, w := range watched {
		report = append(report, statehub.Watched{Repo: w.slug, Where: w.fullName, Link: d.Link(w.fullName)})
	}
	d.mu.Lock()
	d.watched = map[string]string{}
	for _, w := range watched {
		d.watched[strings.ToLower(w.fullName)] = w.slug
	}
	d.report, d.notWatched = report, notWatched
	d.mu.Unlock()
	return watched, nil
}

// noteProblems adds the repositories a look could not read to what status
// says is not watched.
func (d *Driver) noteProblems(problems []statehub.Watched) {
	if len(problems) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range problems {
		delete(d.watched, strings.ToLower(p.Where))
		d.report = slices.DeleteFunc(d.report, func(w statehub.Watched) bool { return w.Where == p.Where })
	}
	d.notWatched = append(d.notWatched, problems...)
	slices.SortFunc(d.notWatched, func(a, b statehub.Watched) int { return strings.Compare(a.Repo, b.Repo) })
}

// slugOf is the gita repo that watches a GitHub repository, as the last
// look saw it (before the first look, as the registry says now).
func (d *Driver) slugOf(ctx context.Context, fullName string) (string, bool, error) {
	d.mu.Lock()
	known := d.watched != nil
	d.mu.Unlock()
	if !known {
		if _, err := d.watch(ctx); err != nil {
			return "", false, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	slug, ok := d.watched[strings.ToLower(fullName)]
	return slug, ok, nil
}
