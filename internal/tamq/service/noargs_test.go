package service_test

import (
	"net"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The operations that take no arguments refuse any, as docs/protocol.md
// says of unknown fields in args: a shutdown with a mistyped argument stops
// nothing.
func TestOperationsWithoutArgumentsRefuseAny(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	startDetached(t, e)
	c, err := net.Dial("unix", e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, op := range []string{"ping", "status", "shutdown"} {
		resp := exchangeOn(t, c, `{"proto":"0.1","op":"`+op+`","id":"x","args":{"bogus":1}}`+"\n")
		if resp.OK || resp.Error == nil || resp.Error.Code != errs.BadRequest {
			t.Errorf("%s with an unknown argument: %+v", op, resp)
		}
	}
	for _, frame := range []string{`{"proto":"0.1","op":"ping","id":"p","args":{}}`, `{"proto":"0.1","op":"ping","id":"p"}`} {
		if resp := exchangeOn(t, c, frame+"\n"); !resp.OK {
			t.Errorf("%s: %+v", frame, resp)
		}
	}
}
