// Package githubdouble is an in-process test double of GitHub's REST API
// (api.github.com, version 2022-11-28), faithful to GitHub's published
// description for the routes our GitHub driver uses: the authenticated
// user, the rate limit, a repository, its issues and pull requests (list,
// get, create, update), their labels, comments and blocked-by
// dependencies, and repository labels. It is what decides whether the
// driver works, so where the description or GitHub's docs say how an
// answer looks (field names and nulls, statuses, error bodies, ETags and
// 304s, Link headers, rate-limit headers and refusals), the double
// answers that way; where they are silent it follows what GitHub was seen
// to answer, and the choice is written next to the code.
//
// A test builds the world as people on github.com would (AddRepo,
// CreateIssue, AddLabels, Close, AddBlockedBy, ...), points the driver at
// URL() with Token(), and reads what happened with Requests or Watch.
// SecondaryLimit, SpendPrimary, Redirect and Fail shape the answers as
// GitHub's limits and faults would. Time comes from Options.Now, so a test
// moves rate windows and Retry-After windows with a fake clock instead of
// sleeping.
//
// Every request must carry the token ("Authorization: Bearer T" or
// "token T"): GitHub answers anonymous reads of public repositories under
// a 60-an-hour limit, but our driver always authenticates, so the double
// refuses anonymous requests (401 "Requires authentication") to catch a
// driver that forgets the header.
//
// Where GitHub's behaviour could not be determined from the description
// or the docs, the double takes the stricter reading, so that a driver
// that passes here does not lean on leniency GitHub may not have:
//   - unknown state, sort or direction values and an unreadable since on
//     the issue list answer 422 (GitHub may instead ignore them);
//   - adding and removing a blocked-by dependency answer the issue in the
//     path (the blocked one), with its updated summary; the description
//     does not say which issue it is;
//   - issue_dependencies_summary counts open issues in blocked_by and
//     blocking and all of them in total_blocked_by and total_blocking;
//   - a pull request cannot be a blocker (422), as a live call was seen to
//     answer;
//   - a secondary-limit refusal, a Fail answer and a 401 do not use up the
//     primary limit; a Redirect answer does.
package githubdouble
