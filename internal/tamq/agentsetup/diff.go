package agentsetup

import "github.com/rogpeppe/go-internal/diff"

// Diff is a unified diff from old to new of the file at path, "" when
// nothing changed; a file that does not exist yet (exists false) comes from
// /dev/null. go-internal's diff is Go's own (an anchored diff, which lines
// up the unique lines: a JSON file's closing braces do not pair up across
// the change).
func Diff(path string, old, new []byte, exists bool) string {
	from := path
	if !exists {
		from = "/dev/null"
	}
	return string(diff.Diff(from, old, path, new))
}
