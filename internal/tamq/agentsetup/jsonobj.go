package agentsetup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tailscale/hujson"
)

// object is a JSON object that keeps its members in the order they came,
// each value as its raw bytes, so a file edited through it keeps every key
// where the user put it and every value as they wrote it.
type object struct{ members []member }

type member struct {
	key   string
	value json.RawMessage
}

// parseObject reads a JSON object. Empty input (or only blanks) is an
// empty object: a settings file someone created and left empty.
func parseObject(raw []byte) (*object, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &object{}, nil
	}
	if !json.Valid(raw) {
		var v any
		return nil, syntaxError(raw, json.Unmarshal(raw, &v))
	}
	return decodeObject(raw)
}

// decodeObject reads raw, valid JSON, as an object, each member's value
// as the bytes it was written with.
func decodeObject(raw []byte) (*object, error) {
	v, err := hujson.Parse(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	o := &object{}
	for _, m := range obj.Members {
		o.members = append(o.members, member{m.Name.Value.(hujson.Literal).String(), raw[m.Value.StartOffset:m.Value.EndOffset]})
	}
	return o, nil
}

// syntaxError says where the JSON went wrong, by line and column.
func syntaxError(raw []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err
	}
	// Offset counts the bytes read, the offending one included.
	before := raw[:min(max(int(se.Offset)-1, 0), len(raw))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("line %d, column %d: %s", line, col, se.Error())
}

// get returns the value of key: the last one when the key repeats, as
// JSON.parse (and so Claude Code) reads it.
func (o *object) get(key string) (json.RawMessage, bool) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return o.members[i].value, true
		}
	}
	return nil, false
}

// set replaces key's value where it stands, or adds it at the end.
func (o *object) set(key string, v json.RawMessage) {
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			o.members[i].value = v
			return
		}
	}
	o.members = append(o.members, member{key, v})
}

// child reads key's value as an object; a missing key is an empty one.
func (o *object) child(key string) (*object, error) {
	v, ok := o.get(key)
	if !ok {
		return &object{}, nil
	}
	if !isKind(v, '{') {
		return nil, fmt.Errorf("%q is not an object", key)
	}
	return decodeObject(v)
}

// array reads key's value as an array, each element raw; a missing key is
// an empty one.
func (o *object) array(key string) ([]json.RawMessage, error) {
	v, ok := o.get(key)
	if !ok {
		return nil, nil
	}
	if !isKind(v, '[') {
		return nil, fmt.Errorf("%q is not an array", key)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		return nil, err
	}
	return elems, nil
}

func isKind(v json.RawMessage, open byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == open
}

// stringsOf returns the elements that are strings, decoded.
func stringsOf(elems []json.RawMessage) []string {
	var out []string
	for _, e := range elems {
		var s string
		if json.Unmarshal(e, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// encode writes the object compactly; values keep their bytes.
func (o *object) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(m.key))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// encodeArray writes elements as one array; they keep their bytes.
func encodeArray(elems []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// jsonString encodes s without escaping <, > and & (as the agents write
// their files).
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}
