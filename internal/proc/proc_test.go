package proc

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a (strange) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	st, err := parseStat(4242, []byte(line))
	if err != nil || st != (Stat{PID: 4242, PPID: 17, State: 'S', PGRP: 4242, TPGID: -1, StartTime: 987654}) {
		t.Fatalf("parseStat = %+v, %v", st, err)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S", "4242 (x) S notanumber 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := parseStat(1, []byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// A child that has exited but is not reaped yet (a zombie) counts as exited:
// it holds nothing any more.
func TestExitedCountsZombies(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if Exited(os.Getpid()) {
		t.Fatal("the test process counts as exited")
	}
	// Wait for the exit but leave the child unreaped (WNOWAIT): a zombie.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !Exited(pid) {
		t.Error("a zombie does not count as exited")
	}
	cmd.Wait()
	if !Exited(pid) {
		t.Error("a reaped child does not count as exited")
	}
}

// A grandchild's ancestors are its parent, then this process, then ours.
func TestAncestors(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var pid int
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	for _, c := range buf[:n] {
		if c >= '0' && c <= '9' {
			pid = pid*10 + int(c-'0')
		}
	}
	defer unix.Kill(pid, unix.SIGKILL)
	chain, err := Ancestors(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) < 3 || chain[0].PID != pid || chain[1].PID != cmd.Process.Pid || chain[2].PID != os.Getpid() {
		t.Fatalf("ancestors of %d: %+v", pid, chain)
	}
	self, _ := ReadStat(os.Getpid())
	if chain[2].StartTime != self.StartTime || self.StartTime == 0 {
		t.Errorf("start times differ: %d vs %d", chain[2].StartTime, self.StartTime)
	}
	if _, err := Ancestors(1 << 30); err == nil {
		t.Error("Ancestors of a pid that does not exist")
	}
}

// The foreground of a terminal follows the shell's jobs: the shell itself
// (its own group) at its prompt, the job it runs (another group) while it
// runs, and the shell again after.
func TestForegroundOf(t *testing.T) {
	sh := exec.Command("sh", "-i")
	sh.Env = append(os.Environ(), "PS1=$ ", "ENV=")
	ptmx, err := pty.Start(sh)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ptmx.Close(); sh.Process.Kill(); sh.Wait() }()
	go bufio.NewReader(ptmx).WriteTo(discard{}) // keep the terminal's output flowing
	// The process table gives no event for a change of foreground: it is
	// looked at until it shows one.
	wait := func(what string, cond func(Foreground) bool) (fg Foreground) {
		t.Helper()
		testutil.WaitFor(t, what, func() bool {
			var err error
			fg, err = ForegroundOf(sh.Process.Pid)
			return err == nil && cond(fg)
		})
		return fg
	}
	// Its command line reads empty while the exec into sh is under way
	// (CI saw it once): looked at until it names the program.
	fg := wait("the shell in the foreground", func(fg Foreground) bool { return fg.OwnGroup && len(fg.Argv) > 0 })
	if fg.PGID != sh.Process.Pid || len(fg.Argv) == 0 || !strings.HasSuffix(fg.Argv[0], "sh") {
		t.Errorf("the shell at its prompt: %+v", fg)
	}
	ptmx.WriteString("sleep 30\n")
	// Between its fork and its exec the job is a copy of the shell, in its
	// own group already: looked at until it is sleep.
	fg = wait("the job in the foreground", func(fg Foreground) bool {
		return !fg.OwnGroup && fg.PGID > 0 && len(fg.Argv) > 0 && fg.Argv[0] == "sleep"
	})
	if !slices.Equal(fg.Argv, []string{"sleep", "30"}) {
		t.Errorf("the job: %+v", fg)
	}
	if kids, err := Children(sh.Process.Pid); err != nil || !slices.Contains(kids, fg.PGID) {
		t.Errorf("children of the shell: %v, %v; the job is %d", kids, err, fg.PGID)
	}
	ptmx.Write([]byte{3}) // ^C ends the job
	wait("the shell in the foreground again", func(fg Foreground) bool { return fg.OwnGroup })
	if _, err := ForegroundOf(1 << 30); err == nil {
		t.Error("ForegroundOf a pid that does not exist")
	}
}

// A process without a terminal has no foreground.
func TestForegroundWithoutATerminal(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if fg, err := ForegroundOf(cmd.Process.Pid); err != nil || fg.PGID != 0 || fg.Argv != nil {
		t.Errorf("foreground without a terminal: %+v, %v", fg, err)
	}
}

func TestCmdline(t *testing.T) {
	argv, err := Cmdline(os.Getpid())
	if err != nil || !slices.Equal(argv, os.Args) {
		t.Errorf("Cmdline(self) = %q, %v; want %q", argv, err, os.Args)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
