package statehub

import (
	"context"
	"sync/atomic"

	"github.com/tmux-amq/tamq/internal/errs"
)

// KindContract is the kind of State Hub that speaks our HTTP contract
// (docs/statehub-contract.md): Client is its driver.
const KindContract = "contract"

// The Client is the contract's driver of the Hub port.
var _ Hub = (*Client)(nil)

// Kind is KindContract.
func (c *Client) Kind() string { return KindContract }

// Offers is what the contract has: everything but task descriptions. A
// server without the optional routes (events, the relayed writes) answers
// 404 to them, and the engine says so when they are used.
func (c *Client) Offers() Offers {
	return Offers{Messages: true, Checkpoints: true, Events: true, TaskSet: true, Receipts: "published"}
}

// Board is Workplans as the port has it. The contract has no dependencies
// outside its workplans: a task that depends on an id no workplan has
// waits for it.
func (c *Client) Board(ctx context.Context) (Board, error) {
	wps, changed, bad, err := c.Workplans(ctx)
	if err != nil {
		return Board{}, err
	}
	return Board{Workplans: wps, Changed: changed, Invalid: bad}, nil
}

// TaskBody is unsupported: the contract's tasks have a title and no
// description.
func (c *Client) TaskBody(context.Context, string) (TaskBody, error) {
	return TaskBody{}, errs.New(errs.Unsupported, "State Hub's contract has no task descriptions: the title is all there is").
		WithHint("read the task in the tracker itself")
}

// Report counts the requests made; the contract has no request budget.
func (c *Client) Report() Report {
	return Report{Kind: KindContract, Requests: c.requests.Load(), NotModified: c.notModified.Load()}
}

// counters of Report, kept apart from the request path's own state.
type counters struct {
	requests, notModified atomic.Int64
}

// Link is "": the contract names no pages for people.
func (c *Client) Link(string) string { return "" }
