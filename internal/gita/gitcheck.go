package gita

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// checkGit decides, as gita's utils.is_git(path, include_bare=True) does, whether
// path is a git repository: it has a .git entry (a directory, or a file for
// worktrees and submodules), or it is a bare repository according to git. A
// non-empty reason says why it is not.
func checkGit(path string, askGit func(string) (bool, string)) (bare bool, reason string) {
	// gita resolves a relative path against its own working directory, which
	// for a daemon is arbitrary; gita itself only ever writes absolute paths.
	if !filepath.IsAbs(path) {
		return false, "path is not absolute"
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, "path does not exist"
	}
	if err != nil {
		return false, "cannot inspect path: " + describeErr(err)
	}
	if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
		return false, ""
	}
	if !info.IsDir() {
		return false, "path is not a directory"
	}
	return askGit(path)
}

// askGit asks git whether the directory at path is a bare repository,
// once for as long as the directory stays as it was (a bare repository's
// HEAD is replaced by a rename, which changes the directory), and not when
// it changed too recently to tell (racyWindow).
func (rd *Reader) askGit(path string) (bare bool, reason string) {
	now := stampOf(path)
	rd.mu.Lock()
	seen, ok := rd.askedGit[path]
	rd.mu.Unlock()
	if ok && seen.at == now && rd.now().Sub(time.Unix(now.ctim.Unix())) > racyWindow {
		return seen.bare, seen.reason
	}
	bare, reason = rd.isBare(path)
	rd.mu.Lock()
	if rd.askedGit == nil {
		rd.askedGit = make(map[string]gitAnswer)
	}
	rd.askedGit[path] = gitAnswer{at: now, bare: bare, reason: reason}
	rd.mu.Unlock()
	return bare, reason
}

// isBare runs git in path to ask whether it is a bare repository.
func isBare(path string) (bare bool, reason string) {
	cmd := exec.Command("git", "rev-parse", "--is-bare-repository")
	cmd.Dir = path
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	switch {
	case err == nil && string(out) == "true\n":
		return true, ""
	case err == nil || errors.As(err, &exitErr):
		return false, "no .git and not a bare repository"
	default:
		return false, "no .git, and cannot run git to look for a bare repository: " + err.Error()
	}
}

// gitEnv drops the variables that would make git answer about another
// repository than the one in its working directory (set when tamq runs from a
// git hook, for instance).
func gitEnv() []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM":
			return true
		}
		return false
	})
}

// describeErr drops the path from err, for messages that already name it.
func describeErr(err error) string {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err.Error()
	}
	return err.Error()
}

// Remote is the URL of a repository's remote as git resolves it
// (`git remote get-url`, which applies url.*.insteadOf), asked in the
// repository's directory; "" with no error when it has no such remote.
func Remote(ctx context.Context, path, name string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "remote", "get-url", "--", name)
	cmd.Dir = path
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), nil
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		// git says "No such remote" (exit 2), or the path is not a
		// repository any more: either way there is no remote to read.
		return "", nil
	}
	return "", err
}
