package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/standin"
)

// The publish operation posts tamq's receipts to the engine's State Hub,
// refuses what is not a batch of tamq's receipts, and passes State Hub's
// failure back so tamq keeps them pending.
func TestPublishOperation(t *testing.T) {
	t.Parallel()
	hubURL, stopHub := testutil.StateHub(t, "engine-token")
	e := testutil.NewEnv(t)
	e.WriteEngineConfig(t, fmt.Sprintf("[statehub]\napi_base = %q\ncredential_command = [\"echo\", \"engine-token\"]\n", hubURL))
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	e.Engine(t, "start", "--detach")
	c := client.New(e.Paths(t, paths.Engine))
	ctx := context.Background()
	// Only tamq's service may publish: anyone else is refused.
	if _, err := c.Publish(ctx, api.PublishArgs{Receipts: []contract.Receipt{{ID: "x", Source: "tamq"}}}); !errs.Is(err, errs.PermissionDeny) {
		t.Fatalf("publish from the operator: %v, want permission_denied", err)
	}
	// The test stands in for tamq's service from here on.
	standin.Serve(t, e.Paths(t, paths.Tamq).Socket)

	receipt := func(id, source string) contract.Receipt {
		return contract.Receipt{ID: id, Source: source, Kind: "message.transition", Status: "injected", At: time.Now().UTC()}
	}
	many := make([]contract.Receipt, contract.MaxProgressBatch+1)
	for i := range many {
		many[i] = receipt(fmt.Sprint(i), "tamq")
	}
	tests := []struct {
		name     string
		receipts []contract.Receipt
		accepted int
		code     errs.Code
	}{
		{"two receipts", []contract.Receipt{receipt("tamq:i:1", "tamq"), receipt("tamq:i:2", "tamq")}, 2, ""},
		{"the same again", []contract.Receipt{receipt("tamq:i:1", "tamq"), receipt("tamq:i:2", "tamq")}, 0, ""},
		{"none", nil, 0, ""},
		{"over the batch limit", many, 0, errs.BadRequest},
		{"without an id", []contract.Receipt{receipt("", "tamq")}, 0, errs.BadRequest},
		{"another source", []contract.Receipt{receipt("ce:1", "coordination-engine")}, 0, errs.BadRequest},
	}
	for _, tt := range tests {
		res, err := c.Publish(ctx, api.PublishArgs{Receipts: tt.receipts})
		switch {
		case tt.code != "" && !errs.Is(err, tt.code):
			t.Errorf("%s: %v, want %s", tt.name, err, tt.code)
		case tt.code == "" && (err != nil || res.Accepted != tt.accepted):
			t.Errorf("%s: accepted %d %v, want %d", tt.name, res.Accepted, err, tt.accepted)
		}
	}

	stopHub()
	if _, err := c.Publish(ctx, api.PublishArgs{Receipts: []contract.Receipt{receipt("tamq:i:3", "tamq")}}); !errs.Is(err, errs.Unavailable) {
		t.Errorf("State Hub down: %v, want unavailable", err)
	}
}
