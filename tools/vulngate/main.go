// Command vulngate runs govulncheck (go tool govulncheck -format json, with
// the arguments it is given), reads its findings and fails on a vulnerability that the programs' code reaches in a module they
// depend on, which a change of ours can fix by moving that module. One in
// the standard library is reported, not failed on: it is fixed by the Go
// that builds the programs, the machine's toolchain, not by the change
// under test. `make vulncheck` runs it.
//
//	go run ./tools/vulngate -db file:///path/to/osv ./...
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// message is one object of govulncheck's JSON stream: only findings count.
type message struct {
	Finding *finding `json:"finding"`
}

type finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []frame `json:"trace"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Function string `json:"function"`
}

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "vulngate:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// run runs govulncheck itself rather than reading a pipe, so that its
// failure (a database it cannot read, code that does not build) is a
// failure here and never reads as a clean scan.
func run(args []string) (int, error) {
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.Command(goCmd, append([]string{"tool", "govulncheck", "-format", "json"}, args...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	code, gateErr := gate(stdout, os.Stdout)
	io.Copy(io.Discard, stdout) // the rest, after a bad line, so it can exit
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("govulncheck: %w", err)
	}
	return code, gateErr
}

// gate writes what it found to out and says the exit status: 1 when a
// dependency's vulnerability is reached, else 0.
func gate(in io.Reader, out io.Writer) (int, error) {
	type key struct{ module, version, osv, fixed string }
	reached := map[key]bool{}
	dec := json.NewDecoder(in)
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return 0, fmt.Errorf("reading govulncheck's JSON: %w", err)
		}
		// A finding is reached when its trace names a function: govulncheck
		// also lists vulnerable modules and packages that are only
		// imported, which the programs never call.
		if f := m.Finding; f != nil && len(f.Trace) > 0 && f.Trace[0].Function != "" {
			reached[key{f.Trace[0].Module, f.Trace[0].Version, f.OSV, f.FixedVersion}] = true
		}
	}
	keys := make([]key, 0, len(reached))
	for k := range reached {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.module, b.module); c != 0 {
			return c
		}
		return strings.Compare(a.osv, b.osv)
	})
	status := 0
	for _, k := range keys {
		if k.module == "stdlib" {
			fmt.Fprintf(out, "warning: %s in the standard library of %s, fixed in %s: build with a newer Go\n", k.osv, k.version, orNone(k.fixed))
			continue
		}
		fmt.Fprintf(out, "%s in %s@%s, fixed in %s: move to the fixed version (go get %s@%s)\n", k.osv, k.module, k.version, orNone(k.fixed), k.module, orNone(k.fixed))
		status = 1
	}
	if status == 0 {
		fmt.Fprintf(out, "no vulnerability reached in a dependency; %d in the standard library\n", len(keys))
	}
	return status, nil
}

func orNone(v string) string {
	if v == "" {
		return "no version yet"
	}
	return v
}
