// Package agentsim is a scripted stand-in for a coding agent, for the
// end-to-end tests of the wake loop and for the demo. It runs in a tamq
// window like a real agent: it reads what arrives on its terminal, and when
// a wake prompt ends with its release command ("When done: coordination-engine
// lease release LEASE ...") it plays its part with the agent commands, as the
// prompt tells an agent to, and updates State Hub as an agent updates its
// tracker. It acknowledges and renews the lease itself, as an agent run
// outside tamq's broker must (its screen never shows a turn that the broker
// could read as the agent at work).
//
// The plan chooses the part, one word per wake in order (the last word
// repeats):
//
//	complete  ack, renew, read the task's description when the prompt
//	          names `task show`, checkpoint, mark the task done (or the
//	          message read) in State Hub through the engine, release
//	          --result completed
//	stall     do nothing: the lease runs out and the work is offered again
//	ackstall  ack, checkpoint, then nothing (the lease expires while held)
//	fail      ack, release --result failed
//	failquit  fail, then quit (the agent's process exits, and with it its
//	          window: an agent that crashed)
//	block     ack, release --result blocked
//	cpblock   ack, checkpoint --blocked-reason human (which ends the lease)
//	work      as a real agent under tamq's broker: report working (Program
//	          Status Protocol, which the broker reads as a turn running),
//	          acknowledge and renew nothing (the broker does), checkpoint,
//	          work until the Hold file is gone, then mark the task done,
//	          release --result completed and report idle
//	workask   work, but ask for a permission while the Hold file exists
//	          (Program Status Protocol: blocked on a permission dialog)
//	workidle  report working, checkpoint, report idle and stop there: the
//	          agent went back to its prompt without releasing
//	follow    as an agent tamq's broker cannot read, which does what its
//	          prompt says and nothing more: ack only when the prompt names
//	          `lease ack`, work while the Hold file exists, renewing
//	          every RenewEvery when the prompt names `lease renew`, then
//	          checkpoint, mark the task done, release --result completed
//	tool      show a file's content as Claude Code shows a tool's output
//	          (the file is ToolFile, notes.txt in the agent's directory:
//	          "⏺ Bash(cat notes.txt)", then "  ⎿  " before its first line
//	          and five spaces before each other), and, when the prompt
//	          holds a message, answer its sender with "⏺ To:<sender>: read
//	          notes.txt" as Claude Code shows the agent's own words; no
//	          lease command
//
// Every command names the attempt when the prompt's commands do
// (--attempt N), as the prompt tells an agent to.
//
// With Wrap set, the agent also shows every line it reads re-wrapped at that
// many columns, as a TUI shows the user's prompt in its transcript: where a
// row starts depends on the agent's width, not on the text's own lines. With
// Say set, it then prints that line of its own after each message it shows.
package agentsim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Config is one agent's part.
type Config struct {
	// Plan is the part per wake (see the package comment); empty: complete.
	Plan []string
	// Engine is the coordination-engine program the agent commands run.
	Engine string
	// Publish makes a completed wake publish its work to State Hub through
	// the engine, as the prompt tells an agent: its task done
	// (coordination-engine task set), its message read (message read).
	Publish bool
	// Reply, when set, makes a completed message wake answer the message's
	// sender with a To: line, which tamq's broker routes to that repo.
	Reply bool
	// Dialog, when set, is a file: while it exists the agent shows a
	// yes/no question at its prompt, as an agent asking for permission
	// does (tamq holds deliveries then); once it is removed the agent
	// clears its screen and is at its prompt again.
	Dialog string
	// Busy, when set, is a file: while it exists the agent says it is at
	// work (as one working for a person does: tamq holds deliveries
	// then); once it is removed the agent is at its prompt again.
	Busy string
	// Hold, when set, is a file: the work part works while it exists.
	Hold string
	// RenewEvery is how often the follow part renews while it works; 0 is
	// 300 ms.
	RenewEvery time.Duration
	// ToolFile is the file the tool part shows; "" is notes.txt.
	ToolFile string
	// Wrap, when over 0, shows each line read re-wrapped at Wrap columns
	// (see the function Wrap).
	Wrap int
	// Say is a line the agent prints as its own words, followed by a blank
	// line, after showing each message ("From:..." line) when Wrap is set.
	Say string
	// Log receives one line per event: "wake LEASE ATTEMPT
	// checkpoint=yes|no task=ID message=ID", "run ARGS... -> STATUS",
	// "statehub ID done|read" then "statehub ID -> STATUS", "done LEASE".
	Log func(format string, args ...any)
}

var (
	// The release command ends a wake prompt.
	releaseLine = regexp.MustCompile(`^When done: \S+ lease release (\S+)(?: --attempt (\d+))? --result`)
	attemptLine = regexp.MustCompile(`lease (\S+), attempt (\d+) of`)
	taskLine    = regexp.MustCompile(`^Task (\S+?)(?: "| in workplan |\.$)`)
	// A tracker with task descriptions (GitHub) names the command that
	// reads one; the id may come quoted.
	showLine    = regexp.MustCompile(`^Read its description .*: \S+ task show '?([^' ]+)'?$`)
	messageLine = regexp.MustCompile(`^Message (\S+) from (\S+):`)
	// The lines that tell an agent tamq cannot read to acknowledge and
	// renew its lease itself.
	ackLine   = regexp.MustCompile(`^First, before anything else: \S+ lease ack `)
	renewLine = regexp.MustCompile(`^While you work, renew it .*: \S+ lease renew `)
	// Bracketed paste markers and carriage returns are terminal framing,
	// not text.
	framing = strings.NewReplacer("\x1b[200~", "", "\x1b[201~", "", "\r", "")
)

// wake is what the agent gathered of one prompt.
type wake struct {
	lease, attempt, task, message, from string
	// show is the task whose description the prompt says to read.
	show    string
	resumed bool
	// named: the prompt's commands name the attempt (--attempt N), so
	// the agent's do too.
	named bool
	// ack, renew: the prompt tells the agent to acknowledge, to renew.
	ack, renew bool
}

// whileFile runs begin at once when the file exists, and end once it is
// removed (in the background); nothing when path is "" or absent.
func whileFile(path string, begin, end func()) {
	if path == "" {
		return
	}
	if _, err := os.Stat(path); err != nil {
		return
	}
	begin()
	go func() {
		for {
			time.Sleep(50 * time.Millisecond) // polling a file: no event to wait on
			if _, err := os.Stat(path); err != nil {
				end()
				return
			}
		}
	}()
}

// Run reads the terminal (in) until it ends, playing the plan on each wake;
// out is the terminal's output.
func Run(in io.Reader, out io.Writer, c Config) {
	if len(c.Plan) == 0 {
		c.Plan = []string{"complete"}
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	fmt.Fprintln(out, "scripted agent ready")
	whileFile(c.Dialog, func() { fmt.Fprint(out, "Do you want to proceed? (y/n) ") }, func() {
		fmt.Fprint(out, "\x1b[2J\x1b[Hscripted agent ready\n")
		c.Log("dialog closed")
	})
	whileFile(c.Busy, func() { fmt.Fprint(out, "\x1b]7501;state=working\x07") }, func() {
		fmt.Fprint(out, "\x1b]7501;state=idle\x07")
		c.Log("busy no more")
	})
	c.Log("ready")
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 64*1024)
	wakes := 0
	var w wake
	for sc.Scan() {
		line := framing.Replace(sc.Text())
		if c.Wrap > 0 {
			for _, row := range Wrap(line, c.Wrap) {
				fmt.Fprintln(out, row)
			}
			if c.Say != "" && strings.HasPrefix(line, "From:") {
				fmt.Fprintf(out, "%s\n\n", c.Say)
			}
		}
		if m := attemptLine.FindStringSubmatch(line); m != nil {
			w = wake{attempt: m[2]}
		}
		if m := taskLine.FindStringSubmatch(line); m != nil {
			w.task = m[1]
		}
		if m := messageLine.FindStringSubmatch(line); m != nil {
			w.message, w.from = m[1], m[2]
		}
		if m := showLine.FindStringSubmatch(line); m != nil {
			w.show = m[1]
		}
		if strings.Contains(line, "Resume from your latest checkpoint") {
			w.resumed = true
		}
		w.ack = w.ack || ackLine.MatchString(line)
		w.renew = w.renew || renewLine.MatchString(line)
		m := releaseLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		w.lease = m[1]
		if m[2] != "" {
			w.attempt, w.named = m[2], true
		}
		part := c.Plan[min(wakes, len(c.Plan)-1)]
		wakes++
		c.play(out, w, part)
		if part == "failquit" {
			return
		}
	}
}

func (c Config) play(out io.Writer, w wake, part string) {
	c.Log("wake %s %s checkpoint=%s task=%s message=%s", w.lease, w.attempt, yesNo(w.resumed), w.task, w.message)
	fmt.Fprintf(out, "woken: lease %s, attempt %s (%s)\n", w.lease, w.attempt, part)
	p := player{Config: c, out: out, w: w}
	switch part {
	case "complete":
		p.complete()
	case "ackstall":
		p.run("lease", "ack", w.lease)
		p.run("checkpoint", "--lease", w.lease, "--summary", "half of the scripted work", "--next", "the other half")
	case "fail", "failquit":
		p.run("lease", "ack", w.lease)
		p.run("lease", "release", w.lease, "--result", "failed", "--reason", "scripted failure")
	case "block":
		p.run("lease", "ack", w.lease)
		p.run("lease", "release", w.lease, "--result", "blocked", "--reason", "needs a human")
	case "cpblock":
		p.run("lease", "ack", w.lease)
		p.run("checkpoint", "--lease", w.lease, "--summary", "stuck: needs a human", "--next", "ask the operator", "--blocked-reason", "human")
	case "work", "workask", "workidle":
		p.work(part)
	case "follow":
		p.follow()
	case "tool":
		c.showTool(out)
		if w.from != "" {
			fmt.Fprintf(out, "⏺ To:%s: read %s\n\n", w.from, c.toolFile())
		}
	case "stall":
	}
	c.Log("done %s", w.lease)
}

// player plays one wake's part: the commands it runs go to out.
type player struct {
	Config
	out io.Writer
	w   wake
}

// engine runs a coordination-engine command and logs it with its exit
// status.
func (p player) engine(args ...string) int {
	status := 0
	// A model runs a command again that says the engine went away in
	// the middle of it (exit 8, unavailable); once is enough here.
	for try := 0; try < 2; try++ {
		cmd := exec.Command(p.Engine, args...)
		cmd.Stdout, cmd.Stderr = p.out, p.out
		status = 0
		if err := cmd.Run(); err != nil {
			status = -1
			if x, ok := err.(*exec.ExitError); ok {
				status = x.ExitCode()
			}
		}
		p.Log("run %s -> %d", strings.Join(args, " "), status)
		if status != 8 {
			break
		}
	}
	return status
}

// run is engine, naming the attempt too when the prompt's commands do.
func (p player) run(args ...string) {
	if p.w.named {
		args = append(args, "--attempt", p.w.attempt)
	}
	p.engine(args...)
}

// setTaskDone marks the wake's task done through the engine, as the prompt
// says (the agent's window has no address or token of State Hub). Logged
// before the command: what State Hub's change sets off may show in the log
// before the answer does.
func (p player) setTaskDone() {
	if p.Publish && p.w.task != "" {
		p.Log("statehub %s done", p.w.task)
		p.Log("statehub %s -> %d", p.w.task, p.engine("task", "set", p.w.task, "--status", "done"))
	}
}

func (p player) complete() {
	w := p.w
	p.run("lease", "ack", w.lease)
	p.run("lease", "renew", w.lease)
	if w.show != "" {
		// As a model would: read the task before working on it.
		p.Log("taskshow %s -> %d", w.show, p.engine("task", "show", w.show))
	}
	p.run("checkpoint", "--lease", w.lease, "--summary", "scripted work done", "--file", "work.txt", "--next", "nothing")
	p.setTaskDone()
	if p.Publish && w.message != "" {
		p.Log("statehub %s read", w.message)
		p.Log("statehub %s -> %d", w.message, p.engine("message", "read", w.message))
	}
	p.run("lease", "release", w.lease, "--result", "completed")
	if p.Reply && w.message != "" && w.from != "" {
		// The broker routes a To: block the agent prints; a blank line
		// ends it.
		fmt.Fprintf(p.out, "To:%s: done with your message %s\n\n", w.from, w.message)
	}
}

// work plays Claude Code's own reports of its state, which the broker
// reads: working, a permission question (workask) while the hold file
// stands, and idle; workidle stops after its checkpoint.
func (p player) work(part string) {
	fmt.Fprint(p.out, "\x1b]7501;state=working\x07")
	// A model reads its prompt for a while before its first tool
	// call; the broker sees the turn and acknowledges meanwhile.
	time.Sleep(500 * time.Millisecond)
	p.run("checkpoint", "--lease", p.w.lease, "--summary", "scripted work begun", "--next", "finish it")
	if part != "workidle" {
		if part == "workask" {
			fmt.Fprint(p.out, "\x1b]7501;state=blocked:kind=permission\x07")
		}
		p.waitWhile(p.Hold)
		fmt.Fprint(p.out, "\x1b]7501;state=working\x07")
		p.setTaskDone()
		p.run("lease", "release", p.w.lease, "--result", "completed")
	}
	fmt.Fprint(p.out, "\x1b]7501;state=idle\x07")
}

// follow works while the hold file stands, renewing at its own pace when
// the wake asks for renewals, then completes.
func (p player) follow() {
	w := p.w
	if w.ack {
		p.run("lease", "ack", w.lease)
	}
	every := p.RenewEvery
	if every <= 0 {
		every = 300 * time.Millisecond
	}
	for p.Hold != "" {
		if _, err := os.Stat(p.Hold); err != nil {
			break
		}
		if w.renew {
			p.run("lease", "renew", w.lease)
		}
		time.Sleep(every) // the agent's own pace between steps
	}
	p.run("checkpoint", "--lease", w.lease, "--summary", "scripted work done", "--next", "nothing")
	p.setTaskDone()
	p.run("lease", "release", w.lease, "--result", "completed")
}

// waitWhile waits until the file is gone ("" or absent: at once).
func (c Config) waitWhile(file string) {
	for file != "" {
		if _, err := os.Stat(file); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling a file: no event to wait on
	}
}

func (c Config) toolFile() string {
	if c.ToolFile == "" {
		return "notes.txt"
	}
	return c.ToolFile
}

// showTool prints the tool part's file as Claude Code shows what a tool
// printed: under the call, indented, the first line after a corner.
func (c Config) showTool(out io.Writer) {
	b, err := os.ReadFile(c.toolFile())
	if err != nil {
		fmt.Fprintf(out, "⏺ Bash(cat %s)\n  ⎿  Error: %v\n\n", c.toolFile(), err)
		return
	}
	fmt.Fprintf(out, "⏺ Bash(cat %s)\n", c.toolFile())
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		lead := "     "
		if i == 0 {
			lead = "  ⎿  "
		}
		fmt.Fprintf(out, "%s%s\n", lead, line)
	}
	fmt.Fprintln(out)
	c.Log("tool %s", c.toolFile())
}

// Wrap breaks text into rows of at most width columns (one column a rune)
// at spaces, as a TUI lays out a paragraph: each row takes the words that
// fit, and a word longer than a row is cut. Runs of white space between
// words show as one space.
func Wrap(text string, width int) []string {
	var rows []string
	row := ""
	for _, word := range strings.Fields(text) {
		for len([]rune(word)) > width {
			if row != "" {
				rows, row = append(rows, row), ""
			}
			rows, word = append(rows, string([]rune(word)[:width])), string([]rune(word)[width:])
		}
		switch {
		case row == "":
			row = word
		case len([]rune(row))+1+len([]rune(word)) <= width:
			row += " " + word
		default:
			rows, row = append(rows, row), word
		}
	}
	return append(rows, row)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
