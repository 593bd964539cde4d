// Package benchutil measures commands against a baseline in the same run, so
// that figures from a shared, noisy machine are ratios, not absolute times.
package benchutil

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Median of the durations (they are sorted in place).
func Median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// Percentile p (0..100) of the durations (sorted in place).
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(float64(len(d)-1) * p / 100)
	return d[i]
}

// Compare runs ours and base alternately b.N times each (alternating spreads
// the machine's noise over both) and reports their medians and ratio.
func Compare(b *testing.B, name string, ours, base func() error) {
	b.Helper()
	var a, c []time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := ours(); err != nil {
			b.Fatal(err)
		}
		a = append(a, time.Since(t0))
		t0 = time.Now()
		if err := base(); err != nil {
			b.Fatal(err)
		}
		c = append(c, time.Since(t0))
	}
	ma, mc := Median(a), Median(c)
	b.ReportMetric(float64(ma.Microseconds())/1000, name+"-median-ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "baseline-median-ms")
	b.ReportMetric(float64(ma)/float64(mc), "ratio")
}

// RunQuiet returns a function that runs a command with its output discarded.
func RunQuiet(env []string, name string, args ...string) func() error {
	return func() error {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		return cmd.Run()
	}
}

// RSS reads a process's resident set size in bytes from /proc.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, os.ErrNotExist
}

// CPUTicks reads a process's user+system CPU time in clock ticks from /proc.
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, os.ErrInvalid
	}
	return utime + stime, nil
}

// StatusKB reads one "Key:  N kB" line (VmRSS, VmHWM, ...) of a process's
// /proc status file, in bytes.
func StatusKB(pid int, key string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, os.ErrNotExist
}

// ClockTicks is the kernel's clock ticks per second (the unit of CPUTicks):
// 100 on every Linux this runs on, read from getconf when it answers.
func ClockTicks() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 100
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return 100
	}
	return n
}
