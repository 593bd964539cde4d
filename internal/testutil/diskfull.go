package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallDisk is a state directory whose space a test can take away and give
// back, to see what a daemon does when its disk fills up. How depends on the
// machine, decided when it is made (TAMQ_DISKFULL_METHOD forces one):
//
//   - "tmpfs": a 32 MiB tmpfs mounted on the directory (needs root, or
//     CAP_SYS_ADMIN); Fill writes a filler file that leaves a few KiB, Free
//     deletes it. Every write to the directory fails, the log's too.
//   - "rlimit": RLIMIT_FSIZE on the daemon processes (needs no privilege):
//     Fill lowers their soft limit to a little above the largest file in the
//     directory, so growing the database or its WAL fails with EFBIG (Go
//     ignores SIGXFSZ); Free raises it again. Only files past the limit
//     fail: a log still below it keeps being written.
//
// An unprivileged user and mount namespace (unshare -rm) would hide the
// mount from the test itself, which reads the database, so it is not used.
type SmallDisk struct {
	Dir    string
	Method string
	filler string
	limits map[int]unix.Rlimit // rlimit: the pids limited, with their limits before
}

// smallDiskSize is the tmpfs's size; leftRoom is what Fill leaves free.
const (
	smallDiskSize = 32 << 20
	leftRoom      = 48 << 10
)

// SmallDisk puts dir (created 0700 if missing) on a small disk for the rest
// of the test. Its cleanup kills this environment's daemons before it takes
// the disk away, since their lock files, which name them, live on it.
func (e *Env) SmallDisk(t testing.TB, dir string) *SmallDisk {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &SmallDisk{Dir: dir, Method: os.Getenv("TAMQ_DISKFULL_METHOD")}
	switch d.Method {
	case "", "tmpfs":
		sweepTestMounts()
		err := unix.Mount(mountSource(os.Getpid()), dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
			fmt.Sprintf("size=%d,mode=0700", smallDiskSize))
		if err == nil {
			d.Method = "tmpfs"
			t.Cleanup(func() {
				e.killService()
				if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
					t.Errorf("unmount %s: %v", dir, err)
				}
			})
			break
		}
		if d.Method == "tmpfs" {
			t.Fatalf("TAMQ_DISKFULL_METHOD=tmpfs: mount a tmpfs on %s: %v", dir, err)
		}
		t.Logf("cannot mount a tmpfs (%v); limiting file sizes instead", err)
		d.Method = "rlimit"
		fallthrough
	case "rlimit":
		d.Method = "rlimit"
		d.limits = map[int]unix.Rlimit{}
		t.Cleanup(func() { d.raise() })
	default:
		t.Fatalf("TAMQ_DISKFULL_METHOD=%q: want tmpfs or rlimit", d.Method)
	}
	t.Logf("disk full by %s on %s", d.Method, dir)
	return d
}

// Fill takes the space away: the tmpfs is filled but for a few KiB, or the
// processes pids (the daemons writing to Dir) may grow no file past a few
// KiB more than the largest there now.
func (d *SmallDisk) Fill(t testing.TB, pids ...int) {
	t.Helper()
	if d.Method == "rlimit" {
		if len(pids) == 0 {
			t.Fatal("SmallDisk.Fill by rlimit needs the pids of the processes writing there")
		}
		limit := uint64(d.largestFile(t) + leftRoom)
		for _, pid := range pids {
			var old unix.Rlimit
			if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: unix.RLIM_INFINITY}, &old); err != nil {
				t.Fatalf("limit the file size of pid %d: %v", pid, err)
			}
			if _, ok := d.limits[pid]; !ok {
				d.limits[pid] = old
			}
		}
		return
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d.Dir, &st); err != nil {
		t.Fatal(err)
	}
	size := int64(st.Bavail)*st.Bsize - leftRoom
	d.filler = filepath.Join(d.Dir, "filler")
	f, err := os.OpenFile(d.filler, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for written := int64(0); written < size; {
		n, err := f.Write(chunk[:min(int64(len(chunk)), size-written)])
		written += int64(n)
		if err != nil {
			// Others write too: what they took is not the filler's.
			if errors.Is(err, unix.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
}

// Free gives the space back.
func (d *SmallDisk) Free(t testing.TB) {
	t.Helper()
	if d.Method == "rlimit" {
		d.raise()
		return
	}
	if err := os.Remove(d.filler); err != nil {
		t.Fatal(err)
	}
}

// raise gives the limited processes back the limits they had.
func (d *SmallDisk) raise() {
	for pid, old := range d.limits {
		unix.Prlimit(pid, unix.RLIMIT_FSIZE, &old, nil) // a process gone has nothing to raise
	}
	clear(d.limits)
}

func (d *SmallDisk) largestFile(t testing.TB) int64 {
	t.Helper()
	var largest int64
	err := filepath.Walk(d.Dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			largest = max(largest, fi.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return largest
}

// mountSource names a test's tmpfs after the test process, so that a later
// run can tell a mount left behind (the process died before its cleanup, as
// at a go test timeout) from one in use.
func mountSource(pid int) string { return "tamq-test-" + strconv.Itoa(pid) }

// sweepTestMounts unmounts the tmpfs mounts of test processes that are gone.
func sweepTestMounts() {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPEROPTS
		fields := strings.Fields(lines.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+2 >= len(fields) || fields[sep+1] != "tmpfs" {
			continue
		}
		pid, ok := strings.CutPrefix(fields[sep+2], "tamq-test-")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil && unix.Kill(n, 0) == unix.ESRCH {
			unix.Unmount(unescapeMountPath(fields[4]), unix.MNT_DETACH)
		}
	}
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Says is how the daemons' errors begin when a write failed for lack of
// room, by the way it was taken away (internal/sqlitedb).
func (d *SmallDisk) Says() string {
	if d.Method == "rlimit" {
		return d.Dir + "/"
	}
	return "the disk holding " + d.Dir + " is full"
}

// ReadFrom reads path from offset on (a log's lines since a moment).
func ReadFrom(t testing.TB, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[min(offset, int64(len(b))):])
}
