// Package buildinfo says which build of the programs is running. The version comes
// from the module version when installed from a tagged module, else from the VCS
// revision the binary was built from, and is never empty.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// version may be set by release builds: -ldflags "-X github.com/tmux-amq/tamq/internal/buildinfo.version=v1.2.3".
var version string

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Dirty     bool   `json:"dirty"`
	GoVersion string `json:"go_version"`
}

// Get reads the build information of the running binary, once: it parses
// the module data the linker embedded, and a command asks for it more than
// once at start (the root's --version and the hello to the service).
var Get = sync.OnceValue(func() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fromParts(version, "", nil)
	}
	return fromParts(version, bi.Main.Version, bi.Settings)
})

// fromParts is Get without the runtime, so every branch can be tested.
func fromParts(ldflagsVersion, moduleVersion string, settings []debug.BuildSetting) Info {
	info := Info{GoVersion: runtime.Version()}
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Dirty = s.Value == "true"
		}
	}
	switch {
	case ldflagsVersion != "":
		info.Version = ldflagsVersion
	case moduleVersion != "" && moduleVersion != "(devel)":
		info.Version = moduleVersion
	case info.Revision != "":
		info.Version = "devel-" + short(info.Revision)
		if info.Dirty {
			info.Version += "-dirty"
		}
	default:
		// Built without module or VCS information (go test, or -buildvcs=false).
		info.Version = "devel"
	}
	return info
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// String is the one-line form printed by --version.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Revision != "" && !strings.Contains(i.Version, short(i.Revision)) {
		b.WriteString(" (" + short(i.Revision))
		if i.Dirty {
			b.WriteString(", dirty")
		}
		b.WriteString(")")
	}
	b.WriteString(" " + i.GoVersion)
	return b.String()
}

// CommitTime is when the source this binary was built from was committed, as
// Go records it (vcs.time), or the zero time when it is not recorded. A build
// cannot precede it, so a clock that reads earlier is wrong.
func CommitTime() time.Time {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return time.Time{}
	}
	return commitTime(bi.Settings)
}

func commitTime(settings []debug.BuildSetting) time.Time {
	for _, s := range settings {
		if s.Key == "vcs.time" {
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}
