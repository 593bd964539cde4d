package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/tamq/api"
	tamqclient "github.com/tmux-amq/tamq/internal/tamq/client"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The service is killed (SIGKILL) at random moments while 8 senders send
// to two windows, half in acknowledged mode, and their brokers relay. After
// each kill the database passes the integrity check and the service starts
// again; at the end every message a sender had accepted was delivered, and
// none twice except, per kill and window, the one being written at the
// kill.
func TestChaosServiceKilledUnderLoad(t *testing.T) {
	t.Parallel()
	rounds := testutil.ChaosRounds(t, 3)
	rng := testutil.ChaosRand(t)
	repos := []string{"alpha", "beta"}
	e, _ := workspace(t, "[delivery]\nenter_pause_ms = 0\n", repos...)
	client := &protocol.Client{Socket: e.Socket()}
	tamq := tamqclient.New(pathsOf(t, e))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	var accepted sync.Map // body -> repo
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				repo, body := repos[n%2], fmt.Sprintf("chaos s%d-%05d", s, n)
				args := api.SendArgs{Text: "To:" + repo + ": " + body}
				if n%4 < 2 {
					args.AckMode = "acknowledged"
				}
				// Accepted means the service answered with the message; a
				// send cut off by the kill may or may not have committed, and
				// the sender, not knowing, may send something else.
				if err := client.Call(ctx, api.OpSend, args, nil); err != nil {
					refused.Add(1)
					time.Sleep(20 * time.Millisecond) // the service is restarting
					continue
				}
				sent.Add(1)
				accepted.Store(body, repo)
				// Steady load (about 80 messages a second in all), not a
				// flood: what is measured is what a kill does to it.
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	// The agents acknowledge what waits for them.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, m := range history(t, e, "--state", "awaiting_ack") {
				tamq.Ack(ctx, m.ID)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	for range rounds {
		// A random moment: the pause is the campaign's schedule, not a wait
		// for something to happen.
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		pid := pingPID(t, e)
		syscall.Kill(pid, syscall.SIGKILL)
		testutil.WaitFor(t, "the service to die", func() bool { return proc.Exited(pid) })
		testutil.IntegrityCheck(t, e.Database())
		e.Tamq(t, "start", "--detach")
	}
	time.Sleep(300 * time.Millisecond) // load after the last restart too
	stop()
	wg.Wait()

	var want []string
	accepted.Range(func(k, _ any) bool { want = append(want, k.(string)); return true })
	final := func() int {
		n := 0
		for _, m := range history(t, e) {
			if m.State == "injected" || m.State == "acknowledged" || m.State == "awaiting_ack" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(2 * time.Minute)
	for n := final(); n < len(want); n = final() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d accepted messages delivered", n, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
	doubled := 0
	for _, repo := range repos {
		got, _ := e.Recording(repo)
		for _, body := range want {
			if r, _ := accepted.Load(body); r != repo {
				continue
			}
			switch c := strings.Count(got, ": "+body+"\r"); {
			case c == 0 && !strings.Contains(got, ": "+body):
				t.Errorf("%s never received %q", repo, body)
			case c > 1:
				doubled += c - 1
			}
		}
	}
	if doubled > rounds*len(repos) {
		t.Errorf("%d deliveries doubled over %d kills of a service delivering to %d windows", doubled, rounds, len(repos))
	}
	testutil.IntegrityCheck(t, e.Database())
	t.Logf("%d kills: %d messages accepted, %d sends refused while the service was down, %d delivered twice (at most one per kill and window)",
		rounds, len(want), refused.Load(), doubled)
}
