package config

import (
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/gita"
)

// keyTypes maps every dotted key a view (Config.View) reads to its Go type,
// so a message about the file can name a key's kind of value and suggest a
// key for a misspelt one. A map's keys are the user's names: a map of
// tables has its tables' keys under "*" (policy.profiles.*.allow).
func keyTypes(view any) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
				// An embedded struct's keys are its parent's (how go-toml decodes it).
				walk(ft, prefix)
				continue
			}
			name := tag
			if name == "" {
				name = f.Name
			}
			key := prefix + name
			out[key] = ft
			switch {
			case ft.Kind() == reflect.Struct && ft.PkgPath() != "time":
				walk(ft, key+".")
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), key+".*.")
			}
		}
	}
	walk(reflect.TypeOf(view), "")
	return out
}

// nearKeys suggests known keys for an unknown one: those of the same table a
// typo or two away (the distance gita's did-you-mean for repos uses), else a
// key of the same name in another table (a key put under the wrong header).
func nearKeys(unknown string, known map[string]reflect.Type) []string {
	parent, last := splitKey(strings.ToLower(unknown))
	maxDist := min(1+utf8.RuneCountInString(last)/4, 3)
	best, bestDist := []string(nil), maxDist+1
	var elsewhere []string
	for key := range known {
		key = instantiate(key, unknown)
		kp, kl := splitKey(key)
		if kl == last && kp != parent {
			elsewhere = append(elsewhere, key)
		}
		if kp != parent {
			continue
		}
		switch d := gita.EditDistance(last, kl); {
		case d < bestDist:
			best, bestDist = []string{key}, d
		case d == bestDist:
			best = append(best, key)
		}
	}
	if len(best) == 0 {
		best = elsewhere
	}
	slices.Sort(best)
	if len(best) > 3 {
		best = best[:3]
	}
	return best
}

// instantiate puts key's segments in place of known's "*" (a map's key,
// the user's name), so policy.profiles.*.allow reads as the key of the
// profile the file names.
func instantiate(known, key string) string {
	if !strings.Contains(known, "*") {
		return known
	}
	ks, us := strings.Split(known, "."), strings.Split(key, ".")
	for i, seg := range ks {
		if seg == "*" && i < len(us) {
			ks[i] = us[i]
		}
	}
	return strings.Join(ks, ".")
}

// typeOf is the Go type of key, a map's names included, or nil.
func typeOf(known map[string]reflect.Type, key string) reflect.Type {
	if t, ok := known[key]; ok {
		return t
	}
	for k, t := range known {
		if instantiate(k, key) == key {
			return t
		}
	}
	return nil
}

func splitKey(key string) (parent, last string) {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// valueKind says in the file's terms what a key of Go type t takes.
func valueKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a quoted string"
	case reflect.Slice, reflect.Array:
		return "a list of " + plural(valueKind(t.Elem()))
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return "a value of type " + t.String()
}

// plural turns valueKind's singular into the plural a list's items take.
func plural(kind string) string {
	switch kind {
	case "a whole number":
		return "whole numbers"
	case "a number":
		return "numbers"
	case "true or false":
		return "true or false values"
	case "a quoted string":
		return "quoted strings"
	case "a table":
		return "tables"
	}
	return "items of " + strings.TrimPrefix(kind, "a ")
}

// article puts "a" or "an" before a TOML kind ("string", "integer", "inline table").
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
