package testutil

import (
	"bytes"
	"io"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// OnTerminal runs cmd with a real PTY as its terminal (standard input, output
// and error), waits for prompt to appear in its output, types answer, and
// returns all it printed once it has exited 0.
func OnTerminal(t testing.TB, cmd *exec.Cmd, prompt, answer string) string {
	t.Helper()
	return OnTerminalWith(t, cmd, prompt, nil, answer)
}

// OnTerminalWith is OnTerminal with atPrompt run while cmd waits at its
// prompt, before the answer is typed (a test's moment to act during cmd).
func OnTerminalWith(t testing.TB, cmd *exec.Cmd, prompt string, atPrompt func(), answer string) string {
	t.Helper()
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return // EIO once the child has exited and closed the terminal
			}
		}
	}()
	WaitFor(t, "the prompt "+prompt, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Contains(out.Bytes(), []byte(prompt))
	})
	if atPrompt != nil {
		atPrompt()
	}
	if _, err := io.WriteString(ptmx, answer); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	// What the child wrote last may still wait in the terminal: it is read
	// to the end (EIO) before the terminal is closed, which would drop it.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	ptmx.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		t.Fatalf("%s on a terminal: %v\n%s", cmd.Path, werr, out.String())
	}
	return out.String()
}
