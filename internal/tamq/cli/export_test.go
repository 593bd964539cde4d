package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestAppendToCommitsOrLeavesTheFileAsItWas(t *testing.T) {
	dir := t.TempDir()
	write := func(file, text string, ok bool) {
		t.Helper()
		w, commit, err := appendTo(file)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, text)
		if err := commit(ok); err != nil {
			t.Fatal(err)
		}
	}
	read := func(file string) string {
		b, _ := os.ReadFile(file)
		return string(b)
	}
	file := filepath.Join(dir, "x.jsonl")
	write(file, "{\"a\":1}\n", false)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a failed export left a new file behind: %v", err)
	}
	write(file, "{\"a\":1}\n", true)
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 || read(file) != "{\"a\":1}\n" {
		t.Errorf("new file %v %q", fi.Mode(), read(file))
	}
	write(file, "{\"b\":2}\n{\"c\":", false)
	if read(file) != "{\"a\":1}\n" {
		t.Errorf("a failed append left %q", read(file))
	}
	// A last line without its newline gets one before the new lines.
	os.WriteFile(file, []byte("{\"a\":1}"), 0o600)
	write(file, "{\"b\":2}\n", true)
	if read(file) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("appended to an unterminated line: %q", read(file))
	}
	if _, _, err := appendTo(dir); err == nil {
		t.Error("a directory was taken as the export file")
	}
}
