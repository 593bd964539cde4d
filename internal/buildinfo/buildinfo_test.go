package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestVersionSources(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}
	clean := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}
	tests := []struct {
		name           string
		ldflags, mod   string
		settings       []debug.BuildSetting
		want           string
		wantInString   string
		wantDirtyField bool
	}{
		{"ldflags wins", "v9.9.9", "v1.0.0", vcs, "v9.9.9", "(0123456789ab, dirty)", true},
		{"module version", "", "v1.2.3", clean, "v1.2.3", "(0123456789ab)", false},
		{"devel with dirty revision", "", "(devel)", vcs, "devel-0123456789ab-dirty", "devel-0123456789ab-dirty go", true},
		{"devel with clean revision", "", "(devel)", clean, "devel-0123456789ab", "devel-0123456789ab go", false},
		{"nothing known", "", "", nil, "devel", "devel go", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := fromParts(tt.ldflags, tt.mod, tt.settings)
			if info.Version != tt.want {
				t.Errorf("Version = %q, want %q", info.Version, tt.want)
			}
			if info.Dirty != tt.wantDirtyField {
				t.Errorf("Dirty = %v, want %v", info.Dirty, tt.wantDirtyField)
			}
			if s := info.String(); !strings.Contains(s, tt.wantInString) {
				t.Errorf("String() = %q, want it to contain %q", s, tt.wantInString)
			}
		})
	}
}

func TestGetNeverEmpty(t *testing.T) {
	if v := Get().Version; v == "" {
		t.Fatal("Get().Version is empty")
	}
}

func TestCommitTime(t *testing.T) {
	at := commitTime([]debug.BuildSetting{{Key: "vcs.revision", Value: "0123"}, {Key: "vcs.time", Value: "2026-11-30T09:15:00Z"}})
	if want := time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC); !at.Equal(want) {
		t.Errorf("commitTime = %v, want %v", at, want)
	}
	if at := commitTime([]debug.BuildSetting{{Key: "vcs.time", Value: "yesterday"}}); !at.IsZero() {
		t.Errorf("a malformed vcs.time gave %v, want the zero time", at)
	}
	if at := commitTime(nil); !at.IsZero() {
		t.Errorf("no vcs.time gave %v, want the zero time", at)
	}
}
