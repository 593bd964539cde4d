package broker

import (
	"bytes"
	"cmp"
	"math/bits"
	"slices"
	"strings"
)

// maxInjectedBytes bounds the folded text of the deliveries remembered; past
// it the oldest are forgotten first. Nothing else bounds them: no count, no
// time. An agent redraws what it was sent for as long as it keeps it (a TUI
// re-rendering its transcript, /resume, scrolling back), hours and hundreds
// of deliveries later, so the broker remembers for its whole life as much
// as an agent can hold: 4 MiB is the text of the largest agent context (a
// million tokens, about 4 MB), 512 deliveries of the largest size
// (queue.MaxPaste), some 7,000 of a typical 600 bytes. It costs about 2.5
// bytes of memory per byte kept (the text and its index), some 12 MiB at
// the bound, held only once that much was delivered into the window: one
// broker runs per window, and a dozen windows must not cost a gigabyte.
const maxInjectedBytes = 4 << 20

// The index: every gramStep-th byte of the text kept starts a sample, the
// gram of gramLen bytes there, hashed into a table of chains. A piece of at
// least gramMin bytes holds a whole sampled gram whatever byte it starts
// at, so the texts it may come from are on that gram's chain, each checked
// byte for byte; a shorter piece ("ok thanks") is looked for in the text
// itself, unless it is an address (below).
const (
	gramStep = 8
	gramLen  = 8
	gramMin  = gramStep + gramLen - 1
	// gramsTried is how many of a piece's grams are followed, together,
	// for each of its possible offsets: the walk stops at the end of the
	// shortest chain, so one rare gram among them keeps it short.
	gramsTried = 4
)

// An address too short for the grams ("To:net:", a block whose body
// follows on the lines below) is looked for only where a kept text says
// "To:", on a chain of those places by the addrKey bytes there: every line
// looked for in all the texts kept is an address, and a kept text says
// "To:" rarely, so the look costs about the same with 10,000 texts kept as
// with 32. Shorter ones ("To:x:") are looked for in the text itself.
const addrKey = 7

// injections remembers the texts tamq wrote into the agent, so that no line
// of them is read back as the agent's own. They are kept folded (every run
// of white space, newlines too, one space): an agent's screen shows a
// delivered text re-wrapped at its own width, indented or with its quote
// marks gone, so a row of it is a piece of the text, not one of its lines.
// A row that starts with "To:<repo>:" because of where the screen wrapped
// must not become a message from this window (security item 8).
//
// A piece is found by its content, not by scanning every text kept: the
// cost of a look stays about the same with 32 texts kept or 10,000
// (BenchmarkInjectionsHold), and the memory grows with the bytes delivered
// (maxInjectedBytes), not with a count of deliveries.
type injections struct {
	// buf holds the folded texts kept, oldest first, each ended by a
	// newline: no folded text or line holds one, so no piece runs from one
	// text into the next.
	buf []byte
	// dead is how many bytes at buf's start belong to texts forgotten;
	// they go at the next rebuild.
	dead  int
	texts []injectedText
	seq   uint64 // texts added so far
	// limit bounds the bytes kept (0: maxInjectedBytes).
	limit int

	// head holds, for each hash of a gram, 1 + the newest sample with
	// that hash (0: none); next, for each sample (the gram at byte
	// sample*gramStep of buf), 1 + the sample before it with the same
	// hash. A chain thus runs from the newest text to the oldest.
	head  []int32
	next  []int32
	shift uint // 64 - log2(len(head))

	// addrAt holds where kept texts say "To:", in order; addrHead, for
	// each hash of the addrKey bytes there, 1 + the last of them with that
	// hash; addrNext, for each, 1 + the one before with the same hash.
	addrAt, addrNext, addrHead []int32
	addrShift                  uint
}

type injectedText struct {
	start int // in buf
	seq   uint64
}

// fold makes every run of white space (newlines, tabs, no-break spaces
// too) one space and trims both ends.
func fold(s string) string { return strings.Join(strings.Fields(s), " ") }

func (r *injections) bound() int {
	if r.limit > 0 {
		return r.limit
	}
	return maxInjectedBytes
}

// add remembers text, injected now.
func (r *injections) add(text string) {
	f := fold(text)
	r.seq++
	if f == "" {
		return
	}
	start := len(r.buf)
	r.texts = append(r.texts, injectedText{start: start, seq: r.seq})
	r.buf = append(append(r.buf, f...), '\n')
	// The oldest go past the bound; the newest is always kept, whatever
	// its size.
	for len(r.texts) > 1 && len(r.buf)-r.dead > r.bound() {
		r.texts = r.texts[1:]
		r.dead = r.texts[0].start
	}
	samples := (len(r.buf) + gramStep - 1) / gramStep
	if samples > len(r.head) || r.dead > (len(r.buf)-r.dead)/4 {
		// The table has fewer slots than samples, or a fifth of the
		// text is forgotten: both are made anew from the texts kept, a
		// pass over them once per as many bytes added (or a quarter as
		// many forgotten).
		r.rebuild()
		return
	}
	r.next = append(r.next, make([]int32, samples-len(r.next))...)
	r.index(start)
	if len(r.addrAt) > len(r.addrHead) {
		r.rebuild() // its table of addresses too
	}
}

// rebuild drops the forgotten texts and makes the tables anew: the power
// of two over the samples (places that say "To:") kept, so between one and
// two slots each.
func (r *injections) rebuild() {
	if r.dead > 0 {
		r.buf = r.buf[:copy(r.buf, r.buf[r.dead:])]
		texts := make([]injectedText, len(r.texts))
		for i, t := range r.texts {
			texts[i] = injectedText{start: t.start - r.dead, seq: t.seq}
		}
		r.texts, r.dead = texts, 0
	}
	samples := (len(r.buf) + gramStep - 1) / gramStep
	b := max(10, bits.Len(uint(samples)))
	if len(r.head) != 1<<b {
		r.head = make([]int32, 1<<b)
	} else {
		clear(r.head)
	}
	r.shift = uint(64 - b)
	r.next = append(r.next[:0], make([]int32, samples)...)
	addrs := 0
	for _, t := range r.texts {
		addrs += bytes.Count(r.buf[t.start:t.start+bytes.IndexByte(r.buf[t.start:], '\n')], []byte("To:"))
	}
	b = max(6, bits.Len(uint(addrs)))
	r.addrHead = make([]int32, 1<<b)
	r.addrShift = uint(64 - b)
	r.addrAt, r.addrNext = r.addrAt[:0], r.addrNext[:0]
	for _, t := range r.texts {
		r.index(t.start)
	}
}

// index adds the sampled grams of the text that starts at start (those
// that lie within it), and the places where it says "To:".
func (r *injections) index(start int) {
	end := start + bytes.IndexByte(r.buf[start:], '\n')
	for s := (start + gramStep - 1) / gramStep; s*gramStep+gramLen <= end; s++ {
		h := r.hash(gram(r.buf[s*gramStep:]))
		r.next[s] = r.head[h]
		r.head[h] = int32(s + 1)
	}
	for at := start; ; at += 3 {
		i := bytes.Index(r.buf[at:end], []byte("To:"))
		if i < 0 {
			return
		}
		at += i
		if at+addrKey > end {
			return
		}
		h := addrHash(r.buf[at:], r.addrShift)
		r.addrAt = append(r.addrAt, int32(at))
		r.addrNext = append(r.addrNext, r.addrHead[h])
		r.addrHead[h] = int32(len(r.addrAt))
	}
}

// addrHash hashes the first addrKey bytes of b into shift's table.
func addrHash[T string | []byte](b T, shift uint) uint64 {
	var k uint64
	for i := range addrKey {
		k |= uint64(b[i]) << (8 * i)
	}
	return (k * 0x9e3779b97f4a7c15) >> shift
}

// gram is the first gramLen bytes of b as a number.
func gram[T string | []byte](b T) uint64 {
	_ = b[gramLen-1]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func (r *injections) hash(g uint64) uint64 { return (g * 0x9e3779b97f4a7c15) >> r.shift }

// holds reports whether line, folded, is a piece of a text kept, injected
// after the first `after` texts (0: any). A line of white space is no piece
// of anything: it ends blocks, as it always did.
func (r *injections) holds(line string, after uint64) bool {
	if r.seq <= after || len(r.texts) == 0 {
		return false // nothing to compare with: most lines, no string made
	}
	f := fold(line)
	if f == "" {
		return false
	}
	from := r.dead
	if after > 0 {
		i, _ := slices.BinarySearchFunc(r.texts, after+1, func(t injectedText, seq uint64) int { return cmp.Compare(t.seq, seq) })
		if i == len(r.texts) {
			return false
		}
		from = r.texts[i].start
	}
	switch {
	case len(f) >= gramMin:
		return r.find(f, from)
	case len(f) >= addrKey && strings.HasPrefix(f, "To:"):
		for a := r.addrHead[addrHash(f, r.addrShift)]; a != 0; a = r.addrNext[a-1] {
			at := int(r.addrAt[a-1])
			if at < from {
				break // the places run from the newest to the oldest
			}
			if end := at + len(f); end <= len(r.buf) && string(r.buf[at:end]) == f {
				return true
			}
		}
		return false
	}
	// Short, and no address ("ok"), or barely one ("To:x:"): looked for in
	// the text itself, which for a line of a block's body means the few
	// texts injected since the block opened.
	return bytes.Contains(r.buf[from:], []byte(f))
}

// find reports whether f occurs in buf at or after from. Wherever f starts,
// its grams at some offset j, j+gramStep, … lie on sampled positions: for
// each j, up to gramsTried of them are followed down their chains in turn,
// and every sample on them is a candidate start, checked byte for byte. A
// chain that ends (or reaches text before from) without a match shows there
// is none at that offset, since every occurrence's gram is on every chain.
func (r *injections) find(f string, from int) bool {
	var off [gramsTried]int
	var at [gramsTried]int32
	for j := range gramStep {
		grams := (len(f)-gramLen-j)/gramStep + 1
		n := min(grams, gramsTried)
		for q := range n {
			// Spread over the piece: its start may be common ("To:net:"),
			// its end rare.
			m := 0
			if n > 1 {
				m = q * (grams - 1) / (n - 1)
			}
			off[q] = j + m*gramStep
			at[q] = r.head[r.hash(gram(f[off[q]:]))]
			if at[q] == 0 {
				n = 0 // a gram no text kept has at a sample: not at this offset
			}
		}
	walk:
		for n > 0 {
			for q := range n {
				s := at[q]
				if s == 0 {
					break walk
				}
				start := int(s-1)*gramStep - off[q]
				if start < from {
					break walk
				}
				if end := start + len(f); end <= len(r.buf) && string(r.buf[start:end]) == f {
					return true
				}
				at[q] = r.next[s-1]
			}
		}
	}
	return false
}
