//go:build dump

package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestDump(t *testing.T) {
	name := os.Getenv("REC")
	dir := "/work/agent-research/recordings/"
	raw, _ := os.ReadFile(dir + name + ".raw")
	var meta struct {
		Snaps map[string]struct {
			Off   int    `json:"raw_offset"`
			X     int    `json:"cursor_x"`
			Y     int    `json:"cursor_y"`
			Vis   bool   `json:"cursor_visible"`
			Title string `json:"pane_title"`
		}
	}
	b, _ := os.ReadFile(dir + name + ".meta.json")
	json.Unmarshal(b, &meta)
	for k, s := range meta.Snaps {
		if s.Off > len(raw) {
			fmt.Printf("=== %s/%s offset past the recording\n", name, k)
			continue
		}
		m := NewModel(120, 40, nil)
		m.Write(raw[:s.Off])
		deadline := time.Now().Add(2 * time.Second)
		for m.Snapshot().Seq == 0 && s.Off > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		sc := m.Snapshot()
		sc.Agent = os.Getenv("AGENT")
		at, why := AtPrompt(sc)
		fmt.Printf("=== %s/%s model cursor=%d,%d vis=%v title=%q alt=%v | tmux %d,%d vis=%v title=%q | atPrompt=%v %s\n", name, k, sc.CursorX, sc.CursorY, sc.CursorVisible, sc.Title, sc.AltScreen, s.X, s.Y, s.Vis, s.Title, at, why)
		snap, _ := os.ReadFile(dir + name + ".snap-" + k + ".txt")
		want := strings.Split(strings.TrimRight(string(snap), "\n"), "\n")
		for i, r := range sc.Rows {
			w := ""
			if i < len(want) {
				w = strings.TrimRight(want[i], " ")
			}
			if r != w && os.Getenv("DIFF") != "" {
				fmt.Printf("  row %d differs:\n   model %q\n   tmux  %q\n", i, r, w)
			}
		}
		m.Close()
	}
}
