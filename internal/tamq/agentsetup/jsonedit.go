package agentsetup

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// jnode is a JSON value of a file as written: where its bytes are and, for
// an object or an array, where its members are.
type jnode struct {
	start, end int // text[start:end] is the value
	kind       byte
	keys       []string // an object's member names, in order
	kids       []*jnode // an object's member values, or an array's elements
}

// scanJSON reads valid JSON text into nodes.
func scanJSON(text []byte) *jnode {
	n, _ := scanValue(text, skipSpace(text, 0))
	return n
}

func skipSpace(text []byte, i int) int {
	for i < len(text) && strings.IndexByte(" \t\r\n", text[i]) >= 0 {
		i++
	}
	return i
}

func scanValue(text []byte, i int) (*jnode, int) {
	n := &jnode{start: i, kind: text[i]}
	switch text[i] {
	case '{', '[':
		closing := byte('}')
		if text[i] == '[' {
			closing = ']'
		}
		i = skipSpace(text, i+1)
		for text[i] != closing {
			if n.kind == '{' {
				end := scanString(text, i)
				var key string
				json.Unmarshal(text[i:end], &key)
				n.keys = append(n.keys, key)
				i = skipSpace(text, skipSpace(text, end)+1) // past the colon
			}
			kid, next := scanValue(text, i)
			n.kids = append(n.kids, kid)
			i = skipSpace(text, next)
			if text[i] == ',' {
				i = skipSpace(text, i+1)
			}
		}
		n.end = i + 1
	case '"':
		n.end = scanString(text, i)
	default:
		for i < len(text) && strings.IndexByte(",]} \t\r\n", text[i]) < 0 {
			i++
		}
		n.end = i
	}
	return n, n.end
}

// scanString returns the offset just after the string that starts at i.
func scanString(text []byte, i int) int {
	for i++; text[i] != '"'; i++ {
		if text[i] == '\\' {
			i++
		}
	}
	return i + 1
}

func keysOf(members []member) []string {
	keys := make([]string, len(members))
	for i, m := range members {
		keys[i] = m.key
	}
	return keys
}

// splice is a replacement of text[at:at+del] by insert.
type splice struct {
	at, del int
	insert  string
}

// render writes want, the new value of the file whose content is old, as
// a change to old that keeps what did not change as it was written: a
// member added to an object that spans lines goes after its last member,
// an element added to such an array after its last element, each indented
// as the one before; a value that changed otherwise (a one-line object or
// array, an empty one) is rewritten in place, indented from its line. The
// result is checked to read back as want; when it does not (it always
// should), the whole file is laid out afresh instead.
func render(old []byte, want json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(old)) == 0 {
		return formatJSON(old, want)
	}
	e := jsonEditor{text: old, unit: indentOf(old), nl: "\n"}
	if bytes.Contains(old, []byte("\r\n")) {
		e.nl = "\r\n"
	}
	e.edit(scanJSON(old), want)
	sort.Slice(e.splices, func(i, j int) bool { return e.splices[i].at > e.splices[j].at })
	out := append([]byte{}, old...)
	for _, s := range e.splices {
		out = append(out[:s.at], append([]byte(s.insert), out[s.at+s.del:]...)...)
	}
	if !sameJSON(out, want) {
		return formatJSON(old, want)
	}
	return out, nil
}

type jsonEditor struct {
	text    []byte
	unit    string // one level of indentation
	nl      string
	splices []splice
}

// edit makes n's text read as want.
func (e *jsonEditor) edit(n *jnode, want json.RawMessage) {
	if bytes.Equal(e.text[n.start:n.end], want) {
		return
	}
	multiline := bytes.IndexByte(e.text[n.start:n.end], '\n') >= 0 && len(n.kids) > 0
	switch {
	case multiline && n.kind == '{' && isKind(want, '{'):
		obj, err := decodeObject(want)
		if err != nil {
			break
		}
		// The new object is the old one's members, in place, then the
		// added ones (object.set).
		if len(obj.members) < len(n.kids) || !slices.Equal(n.keys, keysOf(obj.members[:len(n.kids)])) {
			break
		}
		for i, kid := range n.kids {
			e.edit(kid, obj.members[i].value)
		}
		if added := obj.members[len(n.kids):]; len(added) > 0 {
			last := len(n.kids) - 1
			indent := e.lineIndent(n.kids[last].start)
			var b strings.Builder
			for _, m := range added {
				b.WriteString("," + e.nl + indent + string(jsonString(m.key)) + ": " + e.indent(m.value, indent))
			}
			e.splices = append(e.splices, splice{at: n.kids[last].end, insert: b.String()})
		}
		return
	case multiline && n.kind == '[' && isKind(want, '['):
		var elems []json.RawMessage
		if json.Unmarshal(want, &elems) != nil || len(elems) < len(n.kids) {
			break
		}
		same := true
		for i, kid := range n.kids {
			same = same && bytes.Equal(e.text[kid.start:kid.end], elems[i])
		}
		if !same {
			break
		}
		last := n.kids[len(n.kids)-1]
		indent := e.lineIndent(last.start)
		var b strings.Builder
		for _, el := range elems[len(n.kids):] {
			b.WriteString("," + e.nl + indent + e.indent(el, indent))
		}
		e.splices = append(e.splices, splice{at: last.end, insert: b.String()})
		return
	}
	e.splices = append(e.splices, splice{at: n.start, del: n.end - n.start, insert: e.indent(want, e.lineIndent(n.start))})
}

// lineIndent is the blanks that start the line holding offset at.
func (e *jsonEditor) lineIndent(at int) string {
	start := bytes.LastIndexByte(e.text[:at], '\n') + 1
	end := start
	for end < at && (e.text[end] == ' ' || e.text[end] == '\t') {
		end++
	}
	return string(e.text[start:end])
}

// indent lays out v to stand on a line indented by prefix.
func (e *jsonEditor) indent(v json.RawMessage, prefix string) string {
	var b bytes.Buffer
	if json.Indent(&b, v, prefix, e.unit) != nil {
		return string(v)
	}
	return strings.ReplaceAll(b.String(), "\n", e.nl)
}

// formatJSON lays out a whole file afresh: indented as the old file was
// (two spaces when it had no indentation to go by), with its final newline.
func formatJSON(old []byte, v json.RawMessage) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, v, "", indentOf(old)); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(old)) == 0 || bytes.HasSuffix(old, []byte("\n")) {
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// sameJSON reports whether a and b hold the same value, numbers compared
// as written.
func sameJSON(a, b []byte) bool {
	decode := func(raw []byte) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		return v, dec.Decode(&v) == nil && !dec.More()
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

// indentOf finds the indentation unit of a JSON file: the blanks before
// its first indented line.
func indentOf(raw []byte) string {
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed != "" && trimmed != "\r" && len(trimmed) < len(line) {
			return line[:len(line)-len(trimmed)]
		}
	}
	return "  "
}
