package broker

import "bytes"

// statusProbe is how an agent asks whether the terminal speaks the Program
// Status Protocol (OSC 7501). Claude Code asks, and reports its state
// (idle, working, blocked on a dialog) only to a terminal that answers with
// the same bytes before its answer to the device-attributes query that
// follows. tmux does not answer, so the broker does: it sits between them
// and writes the answer into the agent's input before the probe even
// reaches tmux.
const statusProbe = "\x1b]7501;?"

// probeScanner finds status probes in the agent's output, across reads.
type probeScanner struct {
	tail []byte // the end of the last read, when it may begin a probe
}

// answers returns the answer to each probe completed in chunk (the probe
// with the terminator the agent used, BEL or ST).
func (p *probeScanner) answers(chunk []byte) (answers [][]byte) {
	data := chunk
	if len(p.tail) > 0 {
		data = append(p.tail, chunk...)
		p.tail = nil
	}
	for {
		i := bytes.Index(data, []byte(statusProbe))
		if i < 0 {
			break
		}
		rest := data[i+len(statusProbe):]
		switch {
		case len(rest) == 0 || len(rest) == 1 && rest[0] == 0x1b:
			p.tail = bytes.Clone(data[i:]) // the terminator is still to come
			return answers
		case rest[0] == 0x07:
			answers = append(answers, []byte(statusProbe+"\x07"))
			data = rest[1:]
		case rest[0] == 0x1b && rest[1] == '\\':
			answers = append(answers, []byte(statusProbe+"\x1b\\"))
			data = rest[2:]
		default:
			data = rest
		}
	}
	for k := min(len(statusProbe)-1, len(data)); k > 0; k-- {
		if bytes.HasPrefix([]byte(statusProbe), data[len(data)-k:]) {
			p.tail = bytes.Clone(data[len(data)-k:])
			break
		}
	}
	return answers
}
