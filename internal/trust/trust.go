// Package trust opens the files whose content the programs act on as the
// user: the config files (whose credential_command they run), the gita
// registry (which says where to type) and a repository's continuation
// templates (which go into an agent's prompt); and, with OpenPrivate, the
// reference State Hub's token file. Such a file must say what the
// user, or root, wrote: one that another user can write, or replace, would
// let them run commands or type prompts as the user. The rule is OpenSSH's
// StrictModes and sudo's for sudoers:
//
//   - the file is owned by the user or by root, and neither its group nor
//     others may write it;
//   - its directory is owned by the user or by root, and neither its group
//     nor others may write it unless it has the sticky bit (like /tmp,
//     where nobody can rename or remove a file of the user's).
//
// Ancestors further up are not checked: that is the user's and root's own
// setup (a home directory others may write is a problem far beyond us).
package trust

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Open opens path for reading and refuses it, closed, when someone other
// than the user or root can write it or replace it (see the package's rule).
// The file is checked on the open descriptor, so what is checked is what is
// read even if the name is swapped meanwhile; a symbolic link is followed,
// and the directory of the link and of its target are both checked. what
// names the file in errors ("config file"). The errors of opening it are
// os.OpenFile's, for the caller to word; a refusal is permission_denied,
// naming the path and the chmod or chown that fixes it.
func Open(path, what string) (*os.File, error) {
	return open(path, what, false)
}

// ReadFile is os.ReadFile through Open: the file's bytes, or a refusal, or
// os.ReadFile's errors.
func ReadFile(path, what string) ([]byte, error) {
	f, err := Open(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// OpenPrivate is Open for a secret: it also refuses a file its group or
// others may read.
func OpenPrivate(path, what string) (*os.File, error) {
	return open(path, what, true)
}

func open(path, what string, private bool) (*os.File, error) {
	// O_NONBLOCK: a FIFO planted at the path must not hang the program.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := check(f, path, what, private); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Check refuses f, opened from path, as Open does; for a caller that opens
// the file its own way (without following links, say).
func Check(f *os.File, path, what string) error {
	return check(f, path, what, false)
}

func check(f *os.File, path, what string, private bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return errs.Wrap(errs.PermissionDeny, err, "cannot inspect %s %s", what, path)
	}
	uid := uint32(os.Getuid())
	switch {
	case st.Uid != uid && st.Uid != 0:
		return errs.New(errs.PermissionDeny,
			"refusing to use %s %s: it is owned by uid %d, not by you (uid %d) or root, and its owner can change what it says",
			what, path, st.Uid, uid).
			WithHint("make it yours (as root: chown %d %s), or replace it with a copy of your own", uid, path)
	case private && st.Mode&0o077 != 0:
		return errs.New(errs.PermissionDeny, "refusing to use %s %s: it is readable by others (mode %04o)", what, path, st.Mode&0o7777).
			WithHint("chmod 600 %s", path)
	case st.Mode&0o022 != 0:
		return errs.New(errs.PermissionDeny,
			"refusing to use %s %s: its group or other users may write it (mode %04o), and so change what it says",
			what, path, st.Mode&0o7777).
			WithHint("chmod go-w %s", path)
	}
	// Whoever may write the directory may replace the file. Both the
	// directory named and, through a link, the target's are checked.
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, dir := range dirs {
		if err := checkDir(dir, path, what, uid); err != nil {
			return err
		}
	}
	return nil
}

func checkDir(dir, path, what string, uid uint32) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return errs.Wrap(errs.PermissionDeny, &fs.PathError{Op: "stat", Path: dir, Err: err}, "cannot inspect the directory of %s %s", what, path)
	}
	switch {
	case st.Uid != uid && st.Uid != 0:
		return errs.New(errs.PermissionDeny,
			"refusing to use %s %s: its directory %s is owned by uid %d, not by you (uid %d) or root, and its owner can replace the file",
			what, path, dir, st.Uid, uid).
			WithHint("make the directory yours (as root: chown %d %s), or move the file to a directory of your own", uid, dir)
	case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
		return errs.New(errs.PermissionDeny,
			"refusing to use %s %s: its directory %s may be written by its group or other users (mode %04o, not sticky), who can replace the file",
			what, path, dir, st.Mode&0o7777).
			WithHint("chmod go-w %s", dir)
	}
	return nil
}
