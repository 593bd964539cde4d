package broker

import "strings"

// titleScanner follows the window title the agent sets (OSC 0 or 2) and
// the state it reports through the Program Status Protocol (OSC 7501:
// "state=idle:app=codex", "state=blocked:app=claude-code:kind=permission"),
// each ended by BEL or ST. The emulator's parser ends an OSC string at any
// byte it takes for a C1 control, which cuts titles holding UTF-8 (Claude
// Code's "✳ Claude Code" has 0x9C inside its first character), so these are
// read here, where only BEL and ESC \ end one, as in tmux.
type titleScanner struct {
	state  int
	num    int
	text   []byte
	title  string
	status string // the last root record's state (and kind), "" before any
}

const (
	tsGround = iota
	tsEsc
	tsNum
	tsText
	tsSkip
	tsEnd // ESC inside the string: ST when '\' follows
)

const maxTitle = 512

func (s *titleScanner) feed(p []byte) {
	for _, b := range p {
		switch s.state {
		case tsGround:
			if b == 0x1b {
				s.state = tsEsc
			}
		case tsEsc:
			s.state = tsGround
			if b == ']' {
				s.state, s.num, s.text = tsNum, 0, s.text[:0]
			} else if b == 0x1b {
				s.state = tsEsc
			}
		case tsNum:
			switch {
			case b >= '0' && b <= '9' && s.num < 1000:
				s.num = s.num*10 + int(b-'0')
			case b == ';' && (s.num == 0 || s.num == 2 || s.num == 7501):
				s.state = tsText
			default:
				s.state = tsSkip
				s.end(b)
			}
		case tsText, tsSkip:
			s.end(b)
			if s.state == tsText && b != 0x07 && b != 0x1b && len(s.text) < maxTitle {
				s.text = append(s.text, b)
			}
		case tsEnd:
			if b == '\\' {
				s.finish()
			} else {
				s.state = tsGround // ESC then something else: the string was cut
				if b == ']' {
					s.state, s.num, s.text = tsNum, 0, s.text[:0]
				}
			}
		}
	}
}

// end handles a byte inside an OSC string that may end it.
func (s *titleScanner) end(b byte) {
	switch b {
	case 0x07:
		s.finish()
	case 0x1b:
		if s.state == tsText {
			s.state = tsEnd
			return
		}
		s.state = tsEnd
		s.text = s.text[:0]
		s.num = -1 // not a title: finish drops it
	}
}

func (s *titleScanner) finish() {
	switch s.num {
	case 0, 2:
		s.title = string(s.text)
	case 7501:
		if st, ok := statusRecord(string(s.text)); ok {
			s.status = st
		}
	}
	s.state = tsGround
}

// statusRecord reads one Program Status Protocol record,
// "state=blocked:app=codex:kind=permission", as "blocked:permission". Probes
// ("?") and child records (with id=) are not the agent's own state.
func statusRecord(body string) (string, bool) {
	if strings.HasPrefix(body, "?") {
		return "", false
	}
	var state, kind string
	for _, field := range strings.Split(body, ":") {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "id":
			return "", false
		case "state":
			state = v
		case "kind":
			kind = v
		}
	}
	if state == "" {
		return "", false
	}
	if kind != "" {
		state += ":" + kind
	}
	return state, true
}

// oscCutter takes whole OSC strings (titles, status reports, links) out of
// the output before the emulator sees it. The emulator's parser ends an OSC
// string at a byte it takes for a C1 control, so a title holding UTF-8
// (Gemini CLI's "✦  Working… (repo)", 0x9C inside "✦") would end early and
// the rest of it be printed onto the screen as text. No OSC string changes
// what the screen shows; titleScanner reads the titles and reports.
type oscCutter struct {
	state int // tsGround, tsEsc, tsText (inside an OSC string), tsEnd (ESC inside it)
	out   []byte
}

// cut returns p without its OSC strings; an ESC at p's end is held until
// the next call says whether an OSC string starts.
func (c *oscCutter) cut(p []byte) []byte {
	c.out = c.out[:0]
	for _, b := range p {
		switch c.state {
		case tsGround:
			if b == 0x1b {
				c.state = tsEsc
				continue
			}
			c.out = append(c.out, b)
		case tsEsc:
			switch b {
			case ']':
				c.state = tsText
			case 0x1b:
				c.out = append(c.out, 0x1b)
			default:
				c.out = append(c.out, 0x1b, b)
				c.state = tsGround
			}
		case tsText:
			switch b {
			case 0x07:
				c.state = tsGround
			case 0x1b:
				c.state = tsEnd
			}
		case tsEnd:
			switch b {
			case '\\':
				c.state = tsGround
			case ']':
				c.state = tsText // the string was cut; another starts
			case 0x1b:
				c.state = tsEsc
			default:
				c.out = append(c.out, 0x1b, b) // cut; ESC starts something else
				c.state = tsGround
			}
		}
	}
	return c.out
}
