package githubdouble

import (
	"encoding/json"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// This file holds the JSON shapes of the description's schemas (issue,
// simple-user, label, issue-comment, full-repository, private-user and
// public-user, rate-limit-overview, basic-error and validation-error),
// with their field names, GitHub's field order, and null where the
// description makes a field nullable: GitHub's docs say blank fields are
// included as null, not omitted.

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// stamp is GitHub's timestamp form: UTC, ISO 8601, whole seconds.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func stampOrNull(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := stamp(*t)
	return &s
}

func stringOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nodeID is a global node ID of GitHub's look (a type prefix and an
// encoded database ID); clients treat it as opaque.
func nodeID(kind string, id int64) string {
	return kind + "_kwDO" + strings.ToUpper(strconv.FormatInt(id, 36))
}

// renderer turns the world into JSON for one request: base is the API
// root as the client reached it, web the root of html_url values.
type renderer struct {
	base string
	web  string
}

func (rd renderer) repoAPI(r *repo) string { return rd.base + "/repos/" + r.fullName() }
func (rd renderer) repoWeb(r *repo) string { return rd.web + "/" + r.fullName() }

type userJSON struct {
	Login             string `json:"login"`
	ID                int64  `json:"id"`
	NodeID            string `json:"node_id"`
	AvatarURL         string `json:"avatar_url"`
	GravatarID        string `json:"gravatar_id"`
	URL               string `json:"url"`
	HTMLURL           string `json:"html_url"`
	FollowersURL      string `json:"followers_url"`
	FollowingURL      string `json:"following_url"`
	GistsURL          string `json:"gists_url"`
	StarredURL        string `json:"starred_url"`
	SubscriptionsURL  string `json:"subscriptions_url"`
	OrganizationsURL  string `json:"organizations_url"`
	ReposURL          string `json:"repos_url"`
	EventsURL         string `json:"events_url"`
	ReceivedEventsURL string `json:"received_events_url"`
	Type              string `json:"type"`
	UserViewType      string `json:"user_view_type"`
	SiteAdmin         bool   `json:"site_admin"`
}

// user is a simple-user.
func (rd renderer) user(u *user) *userJSON {
	if u == nil {
		return nil
	}
	api := rd.base + "/users/" + u.login
	return &userJSON{
		Login:             u.login,
		ID:                u.id,
		NodeID:            nodeID("U", u.id),
		AvatarURL:         "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(u.id, 10) + "?v=4",
		GravatarID:        "",
		URL:               api,
		HTMLURL:           rd.web + "/" + u.login,
		FollowersURL:      api + "/followers",
		FollowingURL:      api + "/following{/other_user}",
		GistsURL:          api + "/gists{/gist_id}",
		StarredURL:        api + "/starred{/owner}{/repo}",
		SubscriptionsURL:  api + "/subscriptions",
		OrganizationsURL:  api + "/orgs",
		ReposURL:          api + "/repos",
		EventsURL:         api + "/events{/privacy}",
		ReceivedEventsURL: api + "/received_events",
		Type:              "User",
		UserViewType:      "public",
		SiteAdmin:         false,
	}
}

type labelJSON struct {
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	Color       string  `json:"color"`
	Default     bool    `json:"default"`
	Description *string `json:"description"`
}

func (rd renderer) label(r *repo, l *label) labelJSON {
	return labelJSON{
		ID:     l.id,
		NodeID: nodeID("LA", l.id),
		URL:    rd.repoAPI(r) + "/labels/" + url.PathEscape(l.name),
		Name:   l.name,
		Color:  l.color,
	}
}

func (rd renderer) labels(r *repo, ls []*label) []labelJSON {
	out := make([]labelJSON, 0, len(ls))
	for _, l := range ls {
		out = append(out, rd.label(r, l))
	}
	return out
}

type pullRequestJSON struct {
	URL      string  `json:"url"`
	HTMLURL  string  `json:"html_url"`
	DiffURL  string  `json:"diff_url"`
	PatchURL string  `json:"patch_url"`
	MergedAt *string `json:"merged_at"`
}

type reactionsJSON struct {
	URL        string `json:"url"`
	TotalCount int    `json:"total_count"`
	PlusOne    int    `json:"+1"`
	MinusOne   int    `json:"-1"`
	Laugh      int    `json:"laugh"`
	Hooray     int    `json:"hooray"`
	Confused   int    `json:"confused"`
	Heart      int    `json:"heart"`
	Rocket     int    `json:"rocket"`
	Eyes       int    `json:"eyes"`
}

type subIssuesSummaryJSON struct {
	Total            int `json:"total"`
	Completed        int `json:"completed"`
	PercentCompleted int `json:"percent_completed"`
}

type dependenciesSummaryJSON struct {
	BlockedBy      int `json:"blocked_by"`
	Blocking       int `json:"blocking"`
	TotalBlockedBy int `json:"total_blocked_by"`
	TotalBlocking  int `json:"total_blocking"`
}

type issueJSON struct {
	ID                       int64                   `json:"id"`
	NodeID                   string                  `json:"node_id"`
	URL                      string                  `json:"url"`
	RepositoryURL            string                  `json:"repository_url"`
	LabelsURL                string                  `json:"labels_url"`
	CommentsURL              string                  `json:"comments_url"`
	EventsURL                string                  `json:"events_url"`
	HTMLURL                  string                  `json:"html_url"`
	Number                   int                     `json:"number"`
	State                    string                  `json:"state"`
	Title                    string                  `json:"title"`
	Body                     *string                 `json:"body"`
	User                     *userJSON               `json:"user"`
	PinnedComment            *struct{}               `json:"pinned_comment"`
	Labels                   []labelJSON             `json:"labels"`
	Assignee                 *userJSON               `json:"assignee"`
	Assignees                []userJSON              `json:"assignees"`
	Milestone                *struct{}               `json:"milestone"`
	Locked                   bool                    `json:"locked"`
	ActiveLockReason         *string                 `json:"active_lock_reason"`
	Comments                 int                     `json:"comments"`
	PullRequest              *pullRequestJSON        `json:"pull_request,omitempty"`
	ClosedAt                 *string                 `json:"closed_at"`
	CreatedAt                string                  `json:"created_at"`
	UpdatedAt                string                  `json:"updated_at"`
	Draft                    *bool                   `json:"draft,omitempty"`
	ClosedBy                 *userJSON               `json:"closed_by"`
	AuthorAssociation        string                  `json:"author_association"`
	StateReason              *string                 `json:"state_reason"`
	Type                     *struct{}               `json:"type"`
	SubIssuesSummary         subIssuesSummaryJSON    `json:"sub_issues_summary"`
	IssueDependenciesSummary dependenciesSummaryJSON `json:"issue_dependencies_summary"`
	Reactions                reactionsJSON           `json:"reactions"`
	TimelineURL              string                  `json:"timeline_url"`
	PerformedViaGitHubApp    *struct{}               `json:"performed_via_github_app"`
}

// issue is the description's issue schema. Its url fields use the
// repository's name, as GitHub's do; only Link headers use the
// /repositories/{id} form.
func (rd renderer) issue(i *issue) issueJSON {
	api := rd.repoAPI(i.repo) + "/issues/" + strconv.Itoa(i.number)
	web := rd.repoWeb(i.repo) + "/issues/" + strconv.Itoa(i.number)
	kind := "I"
	if i.pull {
		kind = "PR"
		web = rd.repoWeb(i.repo) + "/pull/" + strconv.Itoa(i.number)
	}
	out := issueJSON{
		ID:                i.id,
		NodeID:            nodeID(kind, i.id),
		URL:               api,
		RepositoryURL:     rd.repoAPI(i.repo),
		LabelsURL:         api + "/labels{/name}",
		CommentsURL:       api + "/comments",
		EventsURL:         api + "/events",
		HTMLURL:           web,
		Number:            i.number,
		State:             i.state,
		Title:             i.title,
		Body:              stringOrNull(i.body),
		User:              rd.user(i.author),
		Labels:            rd.labels(i.repo, i.labels),
		Assignees:         []userJSON{},
		Comments:          len(i.comments),
		ClosedAt:          stampOrNull(i.closedAt),
		CreatedAt:         stamp(i.createdAt),
		UpdatedAt:         stamp(i.updatedAt),
		ClosedBy:          rd.user(i.closedBy),
		AuthorAssociation: i.association,
		StateReason:       stringOrNull(i.stateReason),
		IssueDependenciesSummary: dependenciesSummaryJSON{
			BlockedBy:      countOpen(i.blockedBy),
			Blocking:       countOpen(i.blocking),
			TotalBlockedBy: len(i.blockedBy),
			TotalBlocking:  len(i.blocking),
		},
		Reactions:   reactionsJSON{URL: api + "/reactions"},
		TimelineURL: api + "/timeline",
	}
	if i.pull {
		pulls := rd.repoAPI(i.repo) + "/pulls/" + strconv.Itoa(i.number)
		out.PullRequest = &pullRequestJSON{URL: pulls, HTMLURL: web, DiffURL: web + ".diff", PatchURL: web + ".patch"}
		draft := false
		out.Draft = &draft
	}
	return out
}

// issueBytes is the issue's JSON, encoded again only when the issue
// changed since it was last encoded for this API root.
func (rd renderer) issueBytes(i *issue) []byte {
	if i.json != nil && i.jsonRev == i.rev && i.jsonBase == rd.base {
		return i.json
	}
	i.json, i.jsonRev, i.jsonBase = encode(rd.issue(i)), i.rev, rd.base
	return i.json
}

type commentJSON struct {
	ID                    int64         `json:"id"`
	NodeID                string        `json:"node_id"`
	URL                   string        `json:"url"`
	HTMLURL               string        `json:"html_url"`
	Body                  string        `json:"body"`
	User                  *userJSON     `json:"user"`
	CreatedAt             string        `json:"created_at"`
	UpdatedAt             string        `json:"updated_at"`
	IssueURL              string        `json:"issue_url"`
	AuthorAssociation     string        `json:"author_association"`
	PerformedViaGitHubApp *struct{}     `json:"performed_via_github_app"`
	Reactions             reactionsJSON `json:"reactions"`
	Pin                   *struct{}     `json:"pin"`
	Minimized             *struct{}     `json:"minimized"`
}

// comment is the description's issue-comment schema.
func (rd renderer) comment(c *comment) commentJSON {
	i := c.issue
	web := rd.repoWeb(i.repo) + "/issues/" + strconv.Itoa(i.number)
	if i.pull {
		web = rd.repoWeb(i.repo) + "/pull/" + strconv.Itoa(i.number)
	}
	api := rd.repoAPI(i.repo) + "/issues/comments/" + strconv.FormatInt(c.id, 10)
	return commentJSON{
		ID:                c.id,
		NodeID:            nodeID("IC", c.id),
		URL:               api,
		HTMLURL:           web + "#issuecomment-" + strconv.FormatInt(c.id, 10),
		Body:              c.body,
		User:              rd.user(c.author),
		CreatedAt:         stamp(c.createdAt),
		UpdatedAt:         stamp(c.updatedAt),
		IssueURL:          rd.repoAPI(i.repo) + "/issues/" + strconv.Itoa(i.number),
		AuthorAssociation: c.association,
		Reactions:         reactionsJSON{URL: api + "/reactions"},
	}
}

type permissionsJSON struct {
	Admin    bool `json:"admin"`
	Maintain bool `json:"maintain"`
	Push     bool `json:"push"`
	Triage   bool `json:"triage"`
	Pull     bool `json:"pull"`
}

type repoJSON struct {
	ID                       int64           `json:"id"`
	NodeID                   string          `json:"node_id"`
	Name                     string          `json:"name"`
	FullName                 string          `json:"full_name"`
	Private                  bool            `json:"private"`
	Owner                    *userJSON       `json:"owner"`
	HTMLURL                  string          `json:"html_url"`
	Description              *string         `json:"description"`
	Fork                     bool            `json:"fork"`
	URL                      string          `json:"url"`
	ForksURL                 string          `json:"forks_url"`
	KeysURL                  string          `json:"keys_url"`
	CollaboratorsURL         string          `json:"collaborators_url"`
	TeamsURL                 string          `json:"teams_url"`
	HooksURL                 string          `json:"hooks_url"`
	IssueEventsURL           string          `json:"issue_events_url"`
	EventsURL                string          `json:"events_url"`
	AssigneesURL             string          `json:"assignees_url"`
	BranchesURL              string          `json:"branches_url"`
	TagsURL                  string          `json:"tags_url"`
	BlobsURL                 string          `json:"blobs_url"`
	GitTagsURL               string          `json:"git_tags_url"`
	GitRefsURL               string          `json:"git_refs_url"`
	TreesURL                 string          `json:"trees_url"`
	StatusesURL              string          `json:"statuses_url"`
	LanguagesURL             string          `json:"languages_url"`
	StargazersURL            string          `json:"stargazers_url"`
	ContributorsURL          string          `json:"contributors_url"`
	SubscribersURL           string          `json:"subscribers_url"`
	SubscriptionURL          string          `json:"subscription_url"`
	CommitsURL               string          `json:"commits_url"`
	GitCommitsURL            string          `json:"git_commits_url"`
	CommentsURL              string          `json:"comments_url"`
	IssueCommentURL          string          `json:"issue_comment_url"`
	ContentsURL              string          `json:"contents_url"`
	CompareURL               string          `json:"compare_url"`
	MergesURL                string          `json:"merges_url"`
	ArchiveURL               string          `json:"archive_url"`
	DownloadsURL             string          `json:"downloads_url"`
	IssuesURL                string          `json:"issues_url"`
	PullsURL                 string          `json:"pulls_url"`
	MilestonesURL            string          `json:"milestones_url"`
	NotificationsURL         string          `json:"notifications_url"`
	LabelsURL                string          `json:"labels_url"`
	ReleasesURL              string          `json:"releases_url"`
	DeploymentsURL           string          `json:"deployments_url"`
	CreatedAt                string          `json:"created_at"`
	UpdatedAt                string          `json:"updated_at"`
	PushedAt                 string          `json:"pushed_at"`
	GitURL                   string          `json:"git_url"`
	SSHURL                   string          `json:"ssh_url"`
	CloneURL                 string          `json:"clone_url"`
	SvnURL                   string          `json:"svn_url"`
	Homepage                 *string         `json:"homepage"`
	Size                     int             `json:"size"`
	StargazersCount          int             `json:"stargazers_count"`
	WatchersCount            int             `json:"watchers_count"`
	Language                 *string         `json:"language"`
	HasIssues                bool            `json:"has_issues"`
	HasProjects              bool            `json:"has_projects"`
	HasDownloads             bool            `json:"has_downloads"`
	HasWiki                  bool            `json:"has_wiki"`
	HasPages                 bool            `json:"has_pages"`
	HasDiscussions           bool            `json:"has_discussions"`
	ForksCount               int             `json:"forks_count"`
	MirrorURL                *string         `json:"mirror_url"`
	Archived                 bool            `json:"archived"`
	Disabled                 bool            `json:"disabled"`
	OpenIssuesCount          int             `json:"open_issues_count"`
	License                  *struct{}       `json:"license"`
	AllowForking             bool            `json:"allow_forking"`
	IsTemplate               bool            `json:"is_template"`
	WebCommitSignoffRequired bool            `json:"web_commit_signoff_required"`
	Topics                   []string        `json:"topics"`
	Visibility               string          `json:"visibility"`
	Forks                    int             `json:"forks"`
	OpenIssues               int             `json:"open_issues"`
	Watchers                 int             `json:"watchers"`
	DefaultBranch            string          `json:"default_branch"`
	Permissions              permissionsJSON `json:"permissions"`
	TempCloneToken           *string         `json:"temp_clone_token,omitempty"`
	AllowSquashMerge         bool            `json:"allow_squash_merge"`
	AllowMergeCommit         bool            `json:"allow_merge_commit"`
	AllowRebaseMerge         bool            `json:"allow_rebase_merge"`
	AllowAutoMerge           bool            `json:"allow_auto_merge"`
	DeleteBranchOnMerge      bool            `json:"delete_branch_on_merge"`
	AllowUpdateBranch        bool            `json:"allow_update_branch"`
	NetworkCount             int             `json:"network_count"`
	SubscribersCount         int             `json:"subscribers_count"`
}

// repo is the description's full-repository, as its owner sees it: the
// token's user owns every repository here, so all permissions are true.
func (rd renderer) repo(r *repo) repoJSON {
	api := rd.repoAPI(r)
	web := rd.repoWeb(r)
	host := strings.TrimPrefix(rd.web, "https://")
	open := countOpen(r.issues)
	visibility := "public"
	var tempCloneToken *string
	if r.private {
		visibility = "private"
		empty := ""
		tempCloneToken = &empty
	}
	return repoJSON{
		ID:               r.id,
		NodeID:           nodeID("R", r.id),
		Name:             r.name,
		FullName:         r.fullName(),
		Private:          r.private,
		Owner:            rd.user(r.owner),
		HTMLURL:          web,
		URL:              api,
		ForksURL:         api + "/forks",
		KeysURL:          api + "/keys{/key_id}",
		CollaboratorsURL: api + "/collaborators{/collaborator}",
		TeamsURL:         api + "/teams",
		HooksURL:         api + "/hooks",
		IssueEventsURL:   api + "/issues/events{/number}",
		EventsURL:        api + "/events",
		AssigneesURL:     api + "/assignees{/user}",
		BranchesURL:      api + "/branches{/branch}",
		TagsURL:          api + "/tags",
		BlobsURL:         api + "/git/blobs{/sha}",
		GitTagsURL:       api + "/git/tags{/sha}",
		GitRefsURL:       api + "/git/refs{/sha}",
		TreesURL:         api + "/git/trees{/sha}",
		StatusesURL:      api + "/statuses/{sha}",
		LanguagesURL:     api + "/languages",
		StargazersURL:    api + "/stargazers",
		ContributorsURL:  api + "/contributors",
		SubscribersURL:   api + "/subscribers",
		SubscriptionURL:  api + "/subscription",
		CommitsURL:       api + "/commits{/sha}",
		GitCommitsURL:    api + "/git/commits{/sha}",
		CommentsURL:      api + "/comments{/number}",
		IssueCommentURL:  api + "/issues/comments{/number}",
		ContentsURL:      api + "/contents/{+path}",
		CompareURL:       api + "/compare/{base}...{head}",
		MergesURL:        api + "/merges",
		ArchiveURL:       api + "/{archive_format}{/ref}",
		DownloadsURL:     api + "/downloads",
		IssuesURL:        api + "/issues{/number}",
		PullsURL:         api + "/pulls{/number}",
		MilestonesURL:    api + "/milestones{/number}",
		NotificationsURL: api + "/notifications{?since,all,participating}",
		LabelsURL:        api + "/labels{/name}",
		ReleasesURL:      api + "/releases{/id}",
		DeploymentsURL:   api + "/deployments",
		CreatedAt:        stamp(r.createdAt),
		UpdatedAt:        stamp(r.createdAt),
		PushedAt:         stamp(r.createdAt),
		GitURL:           "git://" + host + "/" + r.fullName() + ".git",
		SSHURL:           "git@" + host + ":" + r.fullName() + ".git",
		CloneURL:         web + ".git",
		SvnURL:           web,
		HasIssues:        !r.issuesDisabled,
		HasProjects:      true,
		HasDownloads:     true,
		HasWiki:          true,
		OpenIssuesCount:  open,
		AllowForking:     true,
		Topics:           []string{},
		Visibility:       visibility,
		OpenIssues:       open,
		DefaultBranch:    "main",
		Permissions:      permissionsJSON{Admin: true, Maintain: true, Push: true, Triage: true, Pull: true},
		TempCloneToken:   tempCloneToken,
		AllowSquashMerge: true,
		AllowMergeCommit: true,
		AllowRebaseMerge: true,
	}
}

type planJSON struct {
	Name          string `json:"name"`
	Space         int64  `json:"space"`
	Collaborators int    `json:"collaborators"`
	PrivateRepos  int    `json:"private_repos"`
}

type meJSON struct {
	*userJSON
	Name              *string   `json:"name"`
	Company           *string   `json:"company"`
	Blog              string    `json:"blog"`
	Location          *string   `json:"location"`
	Email             *string   `json:"email"`
	Hireable          *bool     `json:"hireable"`
	Bio               *string   `json:"bio"`
	TwitterUsername   *string   `json:"twitter_username"`
	PublicRepos       int       `json:"public_repos"`
	PublicGists       int       `json:"public_gists"`
	Followers         int       `json:"followers"`
	Following         int       `json:"following"`
	CreatedAt         string    `json:"created_at"`
	UpdatedAt         string    `json:"updated_at"`
	NotificationEmail *string   `json:"notification_email,omitempty"`
	PrivateGists      *int      `json:"private_gists,omitempty"`
	TotalPrivateRepos *int      `json:"total_private_repos,omitempty"`
	OwnedPrivateRepos *int      `json:"owned_private_repos,omitempty"`
	DiskUsage         *int      `json:"disk_usage,omitempty"`
	Collaborators     *int      `json:"collaborators,omitempty"`
	TwoFactorAuth     *bool     `json:"two_factor_authentication,omitempty"`
	Plan              *planJSON `json:"plan,omitempty"`
}

// me is GET /user's answer. The description's oneOf is decided by the
// token's scopes: with user or read:user the private-user (with
// user_view_type "private" and the private counts), otherwise the
// public-user.
func (rd renderer) me(w *world, scopes []string) meJSON {
	public, private := 0, 0
	for _, r := range w.repos {
		if r.owner != w.me {
			continue
		}
		if r.private {
			private++
		} else {
			public++
		}
	}
	out := meJSON{
		userJSON:    rd.user(w.me),
		PublicRepos: public,
		CreatedAt:   stamp(w.created),
		UpdatedAt:   stamp(w.created),
	}
	for _, s := range scopes {
		if s == "user" || s == "read:user" {
			out.UserViewType = "private"
			zero, yes := 0, true
			out.PrivateGists, out.TotalPrivateRepos, out.OwnedPrivateRepos = &zero, &private, &private
			out.DiskUsage, out.Collaborators, out.TwoFactorAuth = &zero, &zero, &yes
			out.Plan = &planJSON{Name: "free", Space: 976562499, PrivateRepos: 10000}
			break
		}
	}
	return out
}

type rateJSON struct {
	Limit     int   `json:"limit"`
	Used      int   `json:"used"`
	Remaining int   `json:"remaining"`
	Reset     int64 `json:"reset"`
}

type rateLimitJSON struct {
	Resources map[string]rateJSON `json:"resources"`
	Rate      rateJSON            `json:"rate"`
}

// errorBody is basic-error and validation-error as GitHub sends them now,
// with the status as a string.
type errorBody struct {
	Message          string       `json:"message"`
	Errors           []fieldError `json:"errors,omitempty"`
	URL              string       `json:"url,omitempty"`
	DocumentationURL string       `json:"documentation_url"`
	Status           string       `json:"status,omitempty"`
}

// fieldError is one item of a validation-error's errors; code is one of
// GitHub's documented missing, missing_field, invalid, already_exists,
// unprocessable and custom.
type fieldError struct {
	Value    any    `json:"value,omitempty"`
	Resource string `json:"resource"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}
