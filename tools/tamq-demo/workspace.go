package main

import "path/filepath"

// workspace is the layout under the demo's temporary root: every file and
// directory of the run is named here, so setup, the programs' environment
// and cleanup agree on where things are.
type workspace struct {
	dir string // the temporary root of everything below
}

func (w workspace) configDir() string  { return filepath.Join(w.dir, "config") } // XDG_CONFIG_HOME
func (w workspace) stateDir() string   { return filepath.Join(w.dir, "state") }  // XDG_STATE_HOME
func (w workspace) runtimeDir() string { return filepath.Join(w.dir, "run") }    // XDG_RUNTIME_DIR
func (w workspace) gitaDir() string    { return filepath.Join(w.configDir(), "gita") }
func (w workspace) repoDir(r string) string {
	return filepath.Join(w.dir, "repos", r)
}
func (w workspace) agentExe() string { return filepath.Join(w.dir, "bin", "tamq-demo") }
func (w workspace) hubData() string  { return filepath.Join(w.dir, "statehub.json") }
func (w workspace) engineDB() string {
	return filepath.Join(w.stateDir(), "coordination-engine", "coordination.sqlite3")
}
func (w workspace) tamqDB() string     { return filepath.Join(w.stateDir(), "tamq", "tamq.sqlite3") }
func (w workspace) hubPIDFile() string { return filepath.Join(w.dir, "statehub.pid") }

// holdDir holds a file per agent that works until it is removed (the kept
// loop's, keep.go).
func (w workspace) holdDir() string { return filepath.Join(w.dir, "hold") }
