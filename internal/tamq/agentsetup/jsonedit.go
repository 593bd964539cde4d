package agentsetup

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/tailscale/hujson"
)

// render writes want, the new value of the file whose content is old, as
// a change to old that keeps what did not change as it was written: a
// member added to an object that spans lines goes after its last member,
// an element added to such an array after its last element, each indented
// as the one before; a value that changed otherwise (a one-line object or
// array, an empty one) is rewritten in place, indented from its line. The
// edit is made on hujson's syntax tree of old, which packs back every byte
// it was not told to change. The result is checked to read back as want;
// when it does not (it always should), the whole file is laid out afresh
// instead.
func render(old []byte, want json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(old)) == 0 {
		return formatJSON(old, want)
	}
	tree, err := hujson.Parse(old)
	if err != nil {
		return formatJSON(old, want)
	}
	e := jsonEditor{text: old, unit: indentOf(old), nl: "\n"}
	if bytes.Contains(old, []byte("\r\n")) {
		e.nl = "\r\n"
	}
	e.edit(&tree, want)
	out := tree.Pack()
	if !sameJSON(out, want) {
		return formatJSON(old, want)
	}
	return out, nil
}

type jsonEditor struct {
	text []byte // the file as it was parsed: the tree's offsets point into it
	unit string // one level of indentation
	nl   string
}

// edit makes v, a value of the file as parsed, read as want.
func (e *jsonEditor) edit(v *hujson.Value, want json.RawMessage) {
	written := e.text[v.StartOffset:v.EndOffset]
	if bytes.Equal(written, want) {
		return
	}
	if bytes.IndexByte(written, '\n') >= 0 {
		switch old := v.Value.(type) {
		case *hujson.Object:
			if len(old.Members) > 0 && e.extendObject(old, want) {
				return
			}
		case *hujson.Array:
			if len(old.Elements) > 0 && e.extendArray(old, want) {
				return
			}
		}
	}
	v.Value = e.layout(want, e.lineIndent(v.StartOffset))
}

// extendObject edits obj's members in place and adds want's others after
// them, when want is obj's members, in their order, then the added ones
// (object.set); otherwise it changes nothing and says so.
func (e *jsonEditor) extendObject(obj *hujson.Object, want json.RawMessage) bool {
	w, err := decodeObject(want)
	if err != nil || len(w.members) < len(obj.Members) {
		return false
	}
	for i, m := range obj.Members {
		if m.Name.Value.(hujson.Literal).String() != w.members[i].key {
			return false
		}
	}
	for i := range obj.Members {
		e.edit(&obj.Members[i].Value, w.members[i].value)
	}
	indent := e.lineIndent(obj.Members[len(obj.Members)-1].Value.StartOffset)
	for _, m := range w.members[len(obj.Members):] {
		obj.Members = append(obj.Members, hujson.ObjectMember{
			Name:  hujson.Value{BeforeExtra: hujson.Extra(e.nl + indent), Value: hujson.Literal(jsonString(m.key))},
			Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: e.layout(m.value, indent)},
		})
	}
	return true
}

// extendArray adds want's elements after arr's, when want begins with
// arr's elements as written; otherwise it changes nothing and says so.
func (e *jsonEditor) extendArray(arr *hujson.Array, want json.RawMessage) bool {
	var elems []json.RawMessage
	if json.Unmarshal(want, &elems) != nil || len(elems) < len(arr.Elements) {
		return false
	}
	for i, el := range arr.Elements {
		if !bytes.Equal(e.text[el.StartOffset:el.EndOffset], elems[i]) {
			return false
		}
	}
	indent := e.lineIndent(arr.Elements[len(arr.Elements)-1].StartOffset)
	for _, el := range elems[len(arr.Elements):] {
		arr.Elements = append(arr.Elements, hujson.Value{BeforeExtra: hujson.Extra(e.nl + indent), Value: e.layout(el, indent)})
	}
	return true
}

// layout is v laid out to stand on a line indented by prefix, as a value
// of the tree.
func (e *jsonEditor) layout(v json.RawMessage, prefix string) hujson.ValueTrimmed {
	laid, err := hujson.Parse([]byte(e.indent(v, prefix)))
	if err != nil {
		return hujson.Literal(v)
	}
	return laid.Value
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
