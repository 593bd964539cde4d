package agentsetup

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// tomlDoc is a TOML file as written, with what a text edit needs to know
// about it: its values, and where its root keys and its tables end.
type tomlDoc struct {
	text   []byte
	values map[string]any
	// rootEnd is the offset just after the line of the last key/value
	// before the first table header; -1 when there is none.
	rootEnd int
	tables  []tomlTable
	nl      string // the file's line ending
}

// tomlTable is a [table] or [[array table]] section.
type tomlTable struct {
	path  []string
	array bool
	// end is the offset just after the line of its header or of its last
	// key/value.
	end int
}

func parseTOML(text []byte) (*tomlDoc, error) {
	d := &tomlDoc{text: text, values: map[string]any{}, rootEnd: -1, nl: "\n"}
	if bytes.Contains(text, []byte("\r\n")) {
		d.nl = "\r\n"
	}
	if err := toml.Unmarshal(text, &d.values); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("line %d, column %d: %s", row, col, de.Error())
		}
		return nil, err
	}
	var p unstable.Parser
	p.Reset(text)
	var cur *tomlTable
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			var path []string
			var at int
			for it.Next() {
				if path == nil {
					at = int(it.Node().Raw.Offset)
				}
				path = append(path, string(it.Node().Data))
			}
			d.tables = append(d.tables, tomlTable{path: path, array: e.Kind == unstable.ArrayTable, end: d.lineEnd(at)})
			cur = &d.tables[len(d.tables)-1]
		case unstable.KeyValue:
			end := d.lineEnd(int(e.Raw.Offset + e.Raw.Length))
			if cur == nil {
				d.rootEnd = end
			} else {
				cur.end = end
			}
		}
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	return d, nil
}

// lineEnd is the offset just after the newline that ends the line holding
// offset at (or the end of the text).
func (d *tomlDoc) lineEnd(at int) int {
	if i := bytes.IndexByte(d.text[at:], '\n'); i >= 0 {
		return at + i + 1
	}
	return len(d.text)
}

// lookup finds the value at a path of keys.
func (d *tomlDoc) lookup(path ...string) (any, bool) {
	var v any = d.values
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// insert returns the text with lines (a key/value and the comment above
// it) added to table (nil: the root): after the last root key/value, or
// at the top when there is none; after the last key/value of the table's
// [section]; or, when the table has no section of its own, in a new one at
// the end.
func (d *tomlDoc) insert(table []string, lines ...string) []byte {
	block := strings.Join(lines, d.nl) + d.nl
	text := string(d.text)
	at := -1
	switch {
	case table == nil && d.rootEnd >= 0:
		at = d.rootEnd
	case table == nil:
		if strings.TrimSpace(text) != "" {
			block += d.nl
		}
		return []byte(block + text)
	default:
		for _, t := range d.tables {
			if !t.array && slices.Equal(t.path, table) {
				at = t.end
			}
		}
	}
	if at < 0 {
		// A new section at the end.
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += d.nl
		}
		if strings.TrimSpace(text) != "" {
			text += d.nl
		}
		comment, kv := lines[:len(lines)-1], lines[len(lines)-1]
		section := append(append([]string{}, comment...), "["+tomlKeyPath(table)+"]", kv)
		return []byte(text + strings.Join(section, d.nl) + d.nl)
	}
	if at > 0 && text[at-1] != '\n' {
		block = d.nl + block
	}
	if strings.HasPrefix(text[at:], "[") {
		block += d.nl // a blank line before the next table
	}
	return []byte(text[:at] + block + text[at:])
}

// has reports whether the value at path is want.
func (d *tomlDoc) has(path []string, want any) bool {
	v, ok := d.lookup(path...)
	return ok && reflect.DeepEqual(v, want)
}

// keeps reports whether every value of d is in next, unchanged.
func (d *tomlDoc) keeps(next *tomlDoc) bool { return subset(d.values, next.values) }

func subset(old, next map[string]any) bool {
	for k, v := range old {
		w, ok := next[k]
		if !ok {
			return false
		}
		vm, vok := v.(map[string]any)
		wm, wok := w.(map[string]any)
		if vok && wok {
			if !subset(vm, wm) {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(v, w) {
			return false
		}
	}
	return true
}

// tomlKeyPath writes a dotted key, quoting the parts that need it.
func tomlKeyPath(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = tomlKey(p)
	}
	return strings.Join(parts, ".")
}

func tomlKey(k string) string {
	if k != "" && strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == "" {
		return k
	}
	return tomlString(k)
}

// tomlString writes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
