package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// With everything up (State Hub asking for a token the credential command
// prints, both services, a window on a private tmux server that tamq has
// attached to the engine), both doctors pass every check and exit 0. The
// broken setups are in testdata/script/doctor.txtar.
func TestDoctorAllGood(t *testing.T) {
	hubURL, _ := testutil.StateHub(t, "s3cret")
	e := testutil.NewEnv(t)
	e.Gita(t, "net-kingdom")
	hubConfig := fmt.Sprintf("[statehub]\napi_base = %q\ncredential_command = [\"echo\", \"s3cret\"]\n", hubURL)
	e.WriteConfig(t, hubConfig)
	e.WriteEngineConfig(t, hubConfig)
	tm := testutil.NewTmux(t)
	t.Cleanup(func() {
		e.Run(t, "tamq", "stop")
		e.Run(t, "coordination-engine", "stop")
	})
	e.Engine(t, "start", "--detach")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "cat", "net-kingdom")
	testutil.WaitFor(t, "tamq to attach to the engine", func() bool {
		var st tamqapi.StatusReport
		r := e.Run(t, "tamq", "status", "--json")
		return json.Unmarshal([]byte(r.Stdout), &st) == nil && st.Coordination.Attached
	})

	// gita itself may or may not be installed here, and the free disk space
	// is the machine's: those two may warn.
	mayWarn := map[string]bool{"gita": true, "disk": true}
	for program, want := range map[string][]string{
		"tamq":                {"config", "tmux", "gita-registry", "gita", "repos", "socket", "state-dir", "service", "engine", "windows", "queue", "statehub", "statehub-auth", "clock", "disk"},
		"coordination-engine": {"config", "gita-registry", "repos", "socket", "state-dir", "service", "tamq", "tasks", "statehub", "statehub-auth", "clock", "disk"},
	} {
		r := e.Run(t, program, "doctor", "--json")
		if r.Status != 0 {
			t.Fatalf("%s doctor: %s", program, r)
		}
		var rep doctor.Report
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("%s doctor --json: %v\n%s", program, err, r.Stdout)
		}
		if !rep.OK {
			t.Errorf("%s doctor: ok is false", program)
		}
		var names []string
		for _, c := range rep.Checks {
			names = append(names, c.Name)
			if c.Name == "clock" && !strings.Contains(c.Detail, "not before the newest time in the database") {
				t.Errorf("%s doctor: the clock was not compared with the database: %s", program, c.Detail)
			}
			if c.Status != doctor.OK && !(c.Status == doctor.Warn && mayWarn[c.Name]) {
				t.Errorf("%s doctor: %s is %s: %s (fix: %s)", program, c.Name, c.Status, c.Detail, c.Fix)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(want) {
			t.Errorf("%s doctor checks %v, want %v", program, names, want)
		}
		// The human form ends with the count.
		if h := e.Run(t, program, "doctor"); h.Status != 0 {
			t.Errorf("%s doctor: %s", program, h)
		}
	}
}

// State Hub refusing the credentials fails for both programs, with the
// setting to change; without a credential command the engine is told to set
// one (tamq, which then sends no token, is not asked).
func TestDoctorStateHubRefuses(t *testing.T) {
	hubURL, _ := testutil.StateHub(t, "s3cret")
	e := testutil.NewEnv(t)
	e.Gita(t, "net-kingdom")
	check := func(program, name string) (doctor.Check, testutil.Result) {
		t.Helper()
		r := e.Run(t, program, "doctor", "--json")
		var rep doctor.Report
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("%s doctor --json: %v\n%s", program, err, r)
		}
		for _, c := range rep.Checks {
			if c.Name == name {
				return c, r
			}
		}
		t.Fatalf("%s doctor has no %s check:\n%s", program, name, r)
		return doctor.Check{}, r
	}

	wrong := fmt.Sprintf("[statehub]\napi_base = %q\ncredential_command = [\"echo\", \"wrong\"]\n", hubURL)
	e.WriteConfig(t, wrong)
	e.WriteEngineConfig(t, wrong)
	for _, program := range []string{"tamq", "coordination-engine"} {
		c, r := check(program, "statehub-auth")
		if r.Status != 8 || c.Status != doctor.Fail || !strings.Contains(c.Detail, "State Hub refused the credentials") ||
			!strings.HasPrefix(c.Fix, "make statehub.credential_command in ") {
			t.Errorf("%s with a wrong token: %+v\n%s", program, c, r)
		}
	}

	none := fmt.Sprintf("[statehub]\napi_base = %q\n", hubURL)
	e.WriteConfig(t, none)
	e.WriteEngineConfig(t, none)
	if c, r := check("coordination-engine", "statehub-auth"); r.Status != 8 || c.Status != doctor.Fail || !strings.HasPrefix(c.Fix, "State Hub wants a token: set statehub.credential_command") {
		t.Errorf("engine without a token: %+v\n%s", c, r)
	}
	if r := e.Run(t, "tamq", "doctor", "--json"); r.Status != 0 || strings.Contains(r.Stdout, "statehub-auth") {
		t.Errorf("tamq without a credential command checks no token:\n%s", r)
	}
}
