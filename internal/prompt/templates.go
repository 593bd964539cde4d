package prompt

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/trust"
)

// RepoTemplatesFile is where a repository keeps its own continuation
// templates, relative to its root: one template per line.
const RepoTemplatesFile = ".coordination-engine/continuation.txt"

// Limits of a template list, from a repository's file or from config. A
// template is one line of the prompt, and ten of them still leave the
// checkpoint room within MaxBytes.
const (
	MaxTemplates     = 10
	MaxTemplateBytes = 512
	maxTemplatesFile = 16 * 1024
)

// templateProblem says why t cannot be a template, or "" when it can.
func templateProblem(t string) string {
	switch {
	case strings.TrimSpace(t) == "":
		return "it is empty"
	case len(t) > MaxTemplateBytes:
		return fmt.Sprintf("it is %d bytes long; the limit is %d", len(t), MaxTemplateBytes)
	}
	return textsafe.ControlProblem(t)
}

// CheckTemplates validates templates from config: none (the built-in ones
// are used) or 1..MaxTemplates, each one line of at most MaxTemplateBytes of
// valid UTF-8 without control characters.
func CheckTemplates(ts []string) error {
	if len(ts) > MaxTemplates {
		return errs.New(errs.ConfigInvalid, "%d templates; the limit is %d", len(ts), MaxTemplates)
	}
	for i, t := range ts {
		if p := templateProblem(t); p != "" {
			return errs.New(errs.ConfigInvalid, "template %d: %s", i+1, p)
		}
	}
	return nil
}

// MaxDestinationBytes bounds coordination.perspective_destination: a path
// or an address, one line of the prompt.
const MaxDestinationBytes = 256

// CheckDestination validates coordination.perspective_destination: unset,
// or one line of at most MaxDestinationBytes of valid UTF-8 without
// control characters (it goes into every prompt that uses the built-in
// templates).
func CheckDestination(d string) error {
	switch {
	case d == "":
		return nil
	case strings.TrimSpace(d) != d || strings.TrimSpace(d) == "":
		return errs.New(errs.ConfigInvalid, "%q has blanks around it", d)
	case len(d) > MaxDestinationBytes:
		return errs.New(errs.ConfigInvalid, "it is %d bytes long; the limit is %d", len(d), MaxDestinationBytes)
	}
	if p := textsafe.ControlProblem(d); p != "" {
		return errs.New(errs.ConfigInvalid, "%s", p)
	}
	return nil
}

// LoadRepoTemplates reads repoDir's RepoTemplatesFile: one template per
// non-blank line, lines starting with '#' ignored. A missing file is
// (nil, false, nil); a file that breaks the rules of CheckTemplates, holds
// no template, or is larger than 16 KiB is config_invalid, naming the file
// and the line.
//
// The repository may be anyone's clone, so the file and its directory must
// be what they seem: a symbolic link could point us at /dev/zero or at
// another user's file, and a FIFO could hang the engine. Both are refused,
// and the file is opened without following links and checked again through
// its descriptor, so swapping it after the check does not help. A file or
// directory another user can write is refused (permission_denied; see
// internal/trust).
func LoadRepoTemplates(repoDir string) ([]string, bool, error) {
	name := filepath.Join(repoDir, RepoTemplatesFile)
	dir, err := os.Lstat(filepath.Dir(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, errs.New(errs.ConfigInvalid, "%s: %v", name, pathCause(err))
	case !dir.IsDir():
		return nil, false, errs.New(errs.ConfigInvalid, "%s: %s is not a directory (a symbolic link is not followed)", name, filepath.Dir(name))
	}
	fi, err := os.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, errs.New(errs.ConfigInvalid, "%s: %v", name, pathCause(err))
	case !fi.Mode().IsRegular():
		return nil, false, errs.New(errs.ConfigInvalid, "%s: not a regular file (%s); a symbolic link is not followed", name, fi.Mode().Type())
	}
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, errs.New(errs.ConfigInvalid, "%s: %v", name, pathCause(err))
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil || !opened.Mode().IsRegular() || !os.SameFile(fi, opened) {
		return nil, false, errs.New(errs.ConfigInvalid, "%s: changed while being read", name)
	}
	// What it says goes into an agent's prompt, which the agent acts on as
	// the user: a file another user could write, or replace, is refused.
	if err := trust.Check(f, name, "continuation templates"); err != nil {
		return nil, false, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTemplatesFile+1))
	if err != nil {
		return nil, false, errs.New(errs.ConfigInvalid, "%s: %v", name, pathCause(err))
	}
	if len(data) > maxTemplatesFile {
		return nil, false, errs.New(errs.ConfigInvalid, "%s: larger than %d bytes", name, maxTemplatesFile)
	}
	ts, err := parseTemplates(string(data))
	if err != nil {
		return nil, false, errs.New(errs.ConfigInvalid, "%s: %v", name, err)
	}
	return ts, true, nil
}

// parseTemplates reads the file's lines. A trailing CR is dropped, so a
// file written on Windows reads the same; any other control character is
// an error.
func parseTemplates(data string) ([]string, error) {
	var ts []string
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if p := templateProblem(line); p != "" {
			return nil, fmt.Errorf("line %d: %s", i+1, p)
		}
		if len(ts) == MaxTemplates {
			return nil, fmt.Errorf("line %d: more than %d templates", i+1, MaxTemplates)
		}
		ts = append(ts, line)
	}
	if len(ts) == 0 {
		return nil, errors.New("no templates (every line is blank or a comment)")
	}
	return ts, nil
}

func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
