package service_test

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Attached to coordination-engine, tamq hands its receipts to the engine,
// which posts them with its own State Hub settings: they arrive although
// tamq's own statehub.api_base points at a port nobody listens on.
func TestPublishThroughTheEngine(t *testing.T) {
	t.Parallel()
	hubURL, _ := testutil.StateHub(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	e, tm := emptyWorkspace(t, fastConfig+"[statehub]\napi_base = \"http://"+closed+"\"\n", "net-kingdom")
	e.WriteEngineConfig(t, "[statehub]\napi_base = \""+hubURL+"\"\n")
	e.Engine(t, "start", "--detach")
	t.Cleanup(func() { e.Run(t, "coordination-engine", "stop") })
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "net-kingdom")
	testutil.WaitFor(t, "tamq to attach", func() bool { return liveStatus(t, e).Coordination.Attached })

	m := send(t, e, "To:net-kingdom: through the engine")
	waitState(t, e, m.ID, "injected")
	testutil.WaitFor(t, "the message's receipts at State Hub, nothing pending", func() bool {
		st := liveStatus(t, e).StateHub
		if st.UnpublishedReceipts != 0 || st.Publishing == nil || st.Publishing.Via != api.ViaEngine {
			return false
		}
		resp, err := http.Get(hubURL + "/v1/progress")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res struct{ Receipts []contract.Receipt }
		json.NewDecoder(resp.Body).Decode(&res)
		for _, r := range res.Receipts {
			if r.LocalMessageID == m.ID && r.Status == "injected" {
				return true
			}
		}
		return false
	})
}
