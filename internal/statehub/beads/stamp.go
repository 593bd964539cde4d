package beads

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxStamped bounds the files a stamp looks at: a database that has more is
// stamped by its first ones (and read whenever those move).
const maxStamped = 10000

// stampOf is a digest of what moves when bd writes repo's .beads/
// database: every file's name and size, the contents of Dolt's manifests
// (the root of the database: a new one at every commit) and the times of
// the files outside Dolt's store (bd's config). Dolt touches its store's
// files while it only reads (a `bd list` rewrites the same manifest), so
// their times are left out: a look whose stamp is the last one's needs no
// bd process, and a read by the driver itself is no change.
func stampOf(repo string) (string, error) {
	root := filepath.Join(repo, ".beads")
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink != 0 || e.IsDir() {
			return nil
		}
		if n++; n > maxStamped {
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(root, path)
		if volatile(rel) {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return nil // gone meanwhile: the next look sees what replaced it
		}
		fmt.Fprintf(h, "%s\x00%d\x00", rel, fi.Size())
		switch {
		case e.Name() == "manifest" && fi.Size() <= maxManifest:
			if b, err := os.ReadFile(path); err == nil {
				h.Write(b)
			}
		case !strings.HasPrefix(rel, "embeddeddolt"+string(filepath.Separator)) && !strings.HasPrefix(rel, "dolt"+string(filepath.Separator)):
			fmt.Fprintf(h, "%d\x00", fi.ModTime().UnixNano())
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// maxManifest bounds a manifest read: Dolt's is some 150 bytes.
const maxManifest = 4096

// volatile are the files bd touches without changing an issue: its locks
// and logs, its interactions log, last-touched (the issue the last command
// named, rewritten by a mere `bd show`: the agent's `task show` would
// otherwise cost a `bd list` at the next look), and Dolt's temporary files.
func volatile(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasSuffix(base, ".lock") || strings.HasSuffix(base, ".log") || strings.HasSuffix(base, ".sock") ||
		strings.HasSuffix(base, ".pid") || base == "LOCK" || base == "interactions.jsonl" || base == "last-touched" ||
		strings.Contains(rel, string(filepath.Separator)+"temptf"+string(filepath.Separator))
}
