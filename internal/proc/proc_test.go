package proc

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a (strange) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	st, err := parseStat(4242, []byte(line))
	if err != nil || st != (Stat{PID: 4242, PPID: 17, State: 'S', StartTime: 987654}) {
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
