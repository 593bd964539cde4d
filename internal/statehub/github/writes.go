package github

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	gogh "github.com/google/go-github/v89/github"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/secretscan"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// What the engine writes to GitHub, all of it on an agent's behalf or the
// configuration's word: a status as a label or a closing, a note as one
// comment, and (comment_on) a short comment per receipt kind. It writes
// only to issues that are tasks: an issue that does not carry the agent
// label is not touched, whoever asks.

// issue reads one task's issue: refused when it is not a task (a pull
// request, or no agent label), since nothing of an issue nobody labelled
// is acted on or relayed.
func (d *Driver) issue(ctx context.Context, id string) (owner, name, slug string, n int, is *gogh.Issue, err error) {
	full, n, err := ParseTaskID(id)
	if err != nil {
		return "", "", "", 0, nil, errs.New(errs.NotFound, "GitHub has no task %s: a task's id is owner/name#number", textsafe.Escape(id))
	}
	slug, ok, err := d.slugOf(ctx, full)
	if err != nil {
		return "", "", "", 0, nil, err
	}
	if !ok {
		return "", "", "", 0, nil, errs.New(errs.NotFound, "%s is not in a repository the engine watches", id).
			WithHint("`coordination-engine status` lists the repositories watched, and why others are not")
	}
	owner, name, _ = config.ParseGitHubRepo(full)
	_, err = d.call(ctx, "read issue "+id, func(ctx context.Context) (*gogh.Response, error) {
		var resp *gogh.Response
		var err error
		is, resp, err = d.gh.Issues.Get(ctx, owner, name, n)
		return resp, err
	})
	switch {
	case err != nil:
		return "", "", "", 0, nil, err
	case is.IsPullRequest():
		return "", "", "", 0, nil, errs.New(errs.NotFound, "%s is a pull request, not a task", id)
	case !hasLabel(labelNames(is), d.o.Settings.Label):
		return "", "", "", 0, nil, errs.New(errs.PolicyRefused, "%s does not carry the label %q: it is not a task, and the engine neither reads nor changes it", id, d.o.Settings.Label).
			WithHint("a person with triage access labels an issue %q to make it a task", d.o.Settings.Label)
	}
	return owner, name, slug, n, is, nil
}

// SetTask writes the status an agent states: done closes the issue as
// completed, cancelled as not planned; blocked and in_progress are labels
// (each taking the other's off); todo and ready open it again without
// either. A note becomes one comment, posted first.
func (d *Driver) SetTask(ctx context.Context, id string, u contract.TaskUpdate) error {
	g := d.o.Settings
	if !slices.Contains(contract.TaskStatuses, u.Status) {
		return errs.New(errs.BadRequest, "status %q is not one of the contract's", textsafe.Escape(u.Status))
	}
	owner, name, slug, n, is, err := d.issue(ctx, id)
	if err != nil {
		return err
	}
	if u.Note != "" {
		body := fmt.Sprintf("coordination-engine, for the agent of %s: status **%s**. Note: %s", defuse(slug), u.Status, defuse(u.Note))
		if _, err := d.call(ctx, "comment on "+id, func(ctx context.Context) (*gogh.Response, error) {
			_, resp, err := d.gh.Issues.CreateComment(ctx, owner, name, n, &gogh.IssueComment{Body: &body})
			return resp, err
		}); err != nil {
			return err
		}
	}
	edit := func(state, reason string) error {
		_, err := d.call(ctx, "set the state of "+id, func(ctx context.Context) (*gogh.Response, error) {
			_, resp, err := d.gh.Issues.Edit(ctx, owner, name, n, &gogh.IssueRequest{State: &state, StateReason: &reason})
			return resp, err
		})
		return err
	}
	switch u.Status {
	case "done":
		if err := edit("closed", "completed"); err != nil {
			return err
		}
		return d.unlabel(ctx, owner, name, id, n, is, g.InProgressLabel, g.BlockedLabel)
	case "cancelled":
		return edit("closed", "not_planned")
	case "blocked":
		if err := d.label(ctx, owner, name, id, n, is, g.BlockedLabel); err != nil {
			return err
		}
		return d.unlabel(ctx, owner, name, id, n, is, g.InProgressLabel)
	case "in_progress":
		if err := d.label(ctx, owner, name, id, n, is, g.InProgressLabel); err != nil {
			return err
		}
		return d.unlabel(ctx, owner, name, id, n, is, g.BlockedLabel)
	}
	if is.GetState() == "closed" {
		if err := edit("open", "reopened"); err != nil {
			return err
		}
	}
	return d.unlabel(ctx, owner, name, id, n, is, g.InProgressLabel, g.BlockedLabel)
}

// label adds a label the issue does not carry yet.
func (d *Driver) label(ctx context.Context, owner, name, id string, n int, is *gogh.Issue, label string) error {
	if hasLabel(labelNames(is), label) {
		return nil
	}
	_, err := d.call(ctx, "label "+id+" "+label, func(ctx context.Context) (*gogh.Response, error) {
		_, resp, err := d.gh.Issues.AddLabelsToIssue(ctx, owner, name, n, []string{label})
		return resp, err
	})
	return err
}

// unlabel takes off the labels the issue carries of these.
func (d *Driver) unlabel(ctx context.Context, owner, name, id string, n int, is *gogh.Issue, labels ...string) error {
	for _, l := range labelNames(is) {
		if !slices.ContainsFunc(labels, func(want string) bool { return strings.EqualFold(l, want) }) {
			continue
		}
		_, err := d.call(ctx, "take the label "+l+" off "+id, func(ctx context.Context) (*gogh.Response, error) {
			return d.gh.Issues.RemoveLabelForIssue(ctx, owner, name, n, l)
		})
		if err != nil && !errs.Is(err, errs.NotFound) { // already off
			return err
		}
	}
	return nil
}

// defuse keeps text the engine writes into a comment from notifying
// people: an @mention gets a zero-width space after its @, and the text
// is one plain line.
func defuse(s string) string {
	s = strings.Join(strings.Fields(textsafe.Escape(s)), " ")
	return strings.ReplaceAll(s, "@", "@\u200b")
}

// TaskBody is a task's issue with its body, for the agent that works on
// it (`coordination-engine task show`): at most statehub.MaxTaskBody bytes
// of it, cut between characters. The engine scans it before anyone sees it.
func (d *Driver) TaskBody(ctx context.Context, id string) (statehub.TaskBody, error) {
	_, _, slug, _, is, err := d.issue(ctx, id)
	if err != nil {
		return statehub.TaskBody{}, err
	}
	body := is.GetBody()
	if len(body) > statehub.MaxTaskBody {
		body = body[:statehub.MaxTaskBody]
		for !utf8.ValidString(body) {
			body = body[:len(body)-1]
		}
	}
	return statehub.TaskBody{ID: id, Title: is.GetTitle(), Repo: slug, Status: status(is, d.o.Settings), URL: d.Link(id), Body: body}, nil
}

// PostProgress keeps receipts local (GitHub is not a log), except the
// kinds comment_on names: each becomes one short comment on its task's
// issue, at most one per lease (or trigger) and kind, marked so that a
// restart does not post it again. A comment that the secret scan would
// flag is not posted. A receipt whose issue is gone or not a task is
// passed over; an outage fails the batch, to be posted again.
func (d *Driver) PostProgress(ctx context.Context, receipts []contract.Receipt) (int, error) {
	posted := 0
	for _, r := range receipts {
		if !slices.Contains(d.o.Settings.CommentOn, r.Kind) || r.TaskID == "" {
			continue
		}
		ok, err := d.comment(ctx, r)
		if err != nil && (errs.Is(err, errs.Unavailable) || errs.Is(err, errs.Timeout)) {
			return posted, err
		}
		if ok {
			posted++
		}
	}
	return posted, nil
}

// comment posts one receipt's comment, unless it is there already; it
// says whether it posted.
func (d *Driver) comment(ctx context.Context, r contract.Receipt) (bool, error) {
	key := r.Kind + " " + cmp.Or(r.LeaseID, r.TriggerID)
	d.postMu.Lock()
	done := d.posted[key]
	d.postMu.Unlock()
	if done {
		return false, nil
	}
	text := receiptComment(r, key)
	if _, hit := secretscan.Scan(text); hit {
		return false, nil
	}
	owner, name, _, n, _, err := d.issue(ctx, r.TaskID)
	if err != nil {
		return false, err
	}
	marker := commentMarker(key)
	found := false
	for page := 1; page > 0 && page <= 20 && !found; {
		var cs []*gogh.IssueComment
		resp, err := d.call(ctx, "read the comments of "+r.TaskID, func(ctx context.Context) (*gogh.Response, error) {
			var resp *gogh.Response
			var err error
			cs, resp, err = d.gh.Issues.ListComments(ctx, owner, name, n, &gogh.IssueListCommentsOptions{ListOptions: gogh.ListOptions{Page: page, PerPage: perPage}})
			return resp, err
		})
		if err != nil {
			return false, err
		}
		found = slices.ContainsFunc(cs, func(c *gogh.IssueComment) bool { return strings.Contains(c.GetBody(), marker) })
		page = resp.NextPage
	}
	if !found {
		if _, err := d.call(ctx, "comment on "+r.TaskID, func(ctx context.Context) (*gogh.Response, error) {
			_, resp, err := d.gh.Issues.CreateComment(ctx, owner, name, n, &gogh.IssueComment{Body: &text})
			return resp, err
		}); err != nil {
			return false, err
		}
	}
	d.postMu.Lock()
	d.posted[key] = true
	d.postMu.Unlock()
	return !found, nil
}

// commentMarker is the hidden mark of a receipt's comment.
func commentMarker(key string) string { return "<!-- coordination-engine receipt " + key + " -->" }

// receiptWords say a receipt kind for the people reading the issue.
var receiptWords = map[string]string{
	"trigger.stopped":  "stopped at a gate; no agent was woken",
	"trigger.gated":    "held at a gate; checked again later",
	"lease.stopped":    "the work stopped",
	"lease.completed":  "the agent released its work completed",
	"lease.retry_wait": "an attempt ended; the next one waits",
}

// receiptComment is a receipt as a comment: what happened, why (the
// engine's own words, never a prompt or an agent's text), the lease and
// attempt, and the command that tells the whole story.
func receiptComment(r contract.Receipt, key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "coordination-engine")
	if r.Host != "" {
		fmt.Fprintf(&b, " on %s", defuse(r.Host))
	}
	fmt.Fprintf(&b, ": %s", receiptWords[r.Kind])
	if r.Reason != "" {
		fmt.Fprintf(&b, " (%s)", defuse(textsafe.Cut(r.Reason, 200)))
	}
	b.WriteString(".")
	if r.LeaseID != "" {
		fmt.Fprintf(&b, " Lease %s, attempt %d.", r.LeaseID, r.Attempt)
	}
	fmt.Fprintf(&b, " `coordination-engine explain %s` says more.\n\n%s", r.TaskID, commentMarker(key))
	return b.String()
}
