package gita

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The files in testdata were written by Python 3.11's csv module exactly as
// gita 0.16's utils.write_to_repo_file and write_to_groups_file call it:
//
//	csv.writer(f, delimiter=",", quotechar='"', quoting=csv.QUOTE_MINIMAL).writerows(rows)
//
// with the file opened with newline="" (so CRLF line ends), and ':' as the
// delimiter for groups.csv. The two-column files are what older gita wrote.
// Note that QUOTE_MINIMAL quotes a field only for a delimiter, a quote or a
// line break: "with space" alone is not quoted.

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseRepos(t *testing.T) {
	t.Parallel()
	r := func(line int, path, name, typ, flags string) row {
		return row{line: line, repo: Repo{Path: path, Name: name, Type: typ, RawFlags: flags, Flags: strings.Fields(flags)}}
	}
	tests := []struct {
		name string
		data string
		want []row
	}{
		{"python-written four columns", string(readTestdata(t, "repos.csv")), []row{
			r(1, "/home/u/src/net-kingdom", "net-kingdom", "", ""),
			r(2, "/home/u/src/with space,comma", "with space,comma", "", ""),
			r(3, "/home/u/src/with space", "with space", "", ""),
			r(4, `/home/u/src/say "hi"`, `say "hi"`, "", ""),
			r(5, "/home/u/src/flagged", "flagged", "", "--git-dir=/home/u/src/flagged/.git --work-tree=/home/u/src/flagged"),
			r(6, "/home/u/other/net-kingdom", "other/net-kingdom", "", ""),
		}},
		{"python-written two columns", string(readTestdata(t, "repos-two-column.csv")), []row{
			r(1, "/home/u/src/net-kingdom", "net-kingdom", "", ""),
			r(2, "/home/u/src/with space,comma", "with space,comma", "", ""),
		}},
		{"mixed column counts", "/a,a\r\n/b,b,,\r\n/c,c,m\r\n/d,d,,-c x\r\n", []row{
			r(1, "/a", "a", "", ""), r(2, "/b", "b", "", ""), r(3, "/c", "c", "m", ""), r(4, "/d", "d", "", "-c x"),
		}},
		{"blank lines are skipped but counted", "\r\n/a,a,,\r\n\r\n\r\n/b,b,,\r\n\r\n", []row{
			r(2, "/a", "a", "", ""), r(5, "/b", "b", "", ""),
		}},
		{"LF line ends", "/a,a,,\n\n/b,b\n", []row{r(1, "/a", "a", "", ""), r(3, "/b", "b", "", "")}},
		{"no final line end", "/a,a,,\r\n/b,b,,", []row{r(1, "/a", "a", "", ""), r(2, "/b", "b", "", "")}},
		{"needless quotes", "\"/s/a b\",\"a b\",\"\",\"\"\r\n", []row{r(1, "/s/a b", "a b", "", "")}},
		{"spaces are kept", "/p, lead ,,\r\n", []row{r(1, "/p", " lead ", "", "")}},
		{"flags split on runs of spaces", "/a,a,,  -c   x  \r\n", []row{r(1, "/a", "a", "", "  -c   x  ")}},
		// Only in the type column, unused: a name or path may not hold one.
		{"quoted line break moves later line numbers", "/a,a,\"x\r\ny\",\r\n/c,c,,\r\n", []row{
			r(1, "/a", "a", "x\ny", ""), r(3, "/c", "c", "", ""),
		}},
		{"empty file", "", nil},
		{"only blank lines", "\r\n\r\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseRepos("/x/gita/repos.csv", []byte(tt.data))
			if err != nil {
				t.Fatalf("parseRepos: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseRepos(%q)\n got %+v\nwant %+v", tt.data, got, tt.want)
			}
		})
	}
}

func TestParseReposErrors(t *testing.T) {
	t.Parallel()
	const file = "/x/gita/repos.csv"
	tests := []struct {
		name, data, want string
	}{
		{"unterminated quote", "/a,a,,\r\n\"/b,b,,\r\n/c,c,,\r\n", file + `:2: quoted field not closed, or text after its closing "`},
		{"text after closing quote", "/a,a,,\r\n/b,\"b\"x,,\r\n", file + `:2: quoted field not closed, or text after its closing "`},
		{"bare quote", "/a,a,,\r\n/b,b\"c,,\r\n", file + `:2: " inside an unquoted field (quote the field and double the ")`},
		{"empty name", "/a,a,,\r\n/b,,,\r\n", file + ":2: empty name"},
		{"empty path", "/a,a,,\r\n,b,,\r\n", file + ":2: empty path"},
		{"path only", "/a,a,,\r\n\r\n/b\r\n", file + ":3: row has 1 field, want path,name[,type,flags]"},
		{"blank-looking line", "/a,a,,\n   \n", file + ":2: row has 1 field, want path,name[,type,flags]"},
		{"too many fields", "/a,a,,,x\r\n", file + ":1: row has 5 fields, want path,name[,type,flags]"},
		{"duplicate name", "/a,a,,\r\n/b,b,,\r\n/c,a,,\r\n", file + ":3: duplicate name 'a' (first on line 1)"},
		{"names are case-sensitive, duplicates exact", "/a,a,,\r\n/b,A,,\r\n/c,A,,\r\n", file + ":3: duplicate name 'A' (first on line 2)"},
		// A name is typed into agents' terminals and printed by every command:
		// nothing in it may act there, and the message shows it escaped.
		{"OSC 52 in a name", "/a,a,,\r\n/b,\"evil\x1b]52;c;aGk=\x07\",,\r\n", file + `:2: name 'evil\x1b]52;c;aGk=\x07' cannot be used: it has the control or format character U+001B at byte 4`},
		{"end of bracketed paste in a name", "/a,evil\x1b[201~,,\r\n", file + `:1: name 'evil\x1b[201~' cannot be used: it has the control or format character U+001B at byte 4`},
		{"bidi override in a name", "/a,a,,\r\n/b,txt\u202egnp.exe,,\r\n", file + `:2: name 'txt\u202egnp.exe' cannot be used: it has the control or format character U+202E at byte 3`},
		{"BEL in a name", "/a,ding\a,,\r\n", file + `:1: name 'ding\x07' cannot be used: it has the control or format character U+0007 at byte 4`},
		{"C1 CSI in a name", "/a,c1\u009b31m,,\r\n", file + `:1: name 'c1\x9b31m' cannot be used: it has the control or format character U+009B at byte 2`},
		{"line break in a quoted name", "/a,\"two\nlines\",,\r\n", file + `:1: name 'two\x0alines' cannot be used: it has the control or format character U+000A at byte 3`},
		{"invalid UTF-8 in a name", "/a,bad\xff,,\r\n", file + `:1: name 'bad\xff' cannot be used: it is not valid UTF-8`},
		{"name too long", "/a," + strings.Repeat("n", 300) + ",,\r\n", file + ":1: name '" + strings.Repeat("n", 300) + "' cannot be used: it is 300 bytes long; the limit is 256"},
		{"escape in a path", "/a,a,,\r\n/src/\x1b[2J,b,,\r\n", file + `:2: path '/src/\x1b[2J' cannot be used: it has the control or format character U+001B at byte 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rows, err := parseRepos(file, []byte(tt.data))
			if err == nil {
				t.Fatalf("parseRepos(%q) = %+v, want error %q", tt.data, rows, tt.want)
			}
			if !errs.Is(err, errs.RegistryError) || err.Error() != tt.want {
				t.Fatalf("parseRepos(%q) error\n got %q (%s)\nwant %q", tt.data, err, errs.CodeOf(err), tt.want)
			}
		})
	}
}

func TestParseGroups(t *testing.T) {
	t.Parallel()
	const file = "/x/gita/groups.csv"
	tests := []struct {
		name    string
		data    string
		want    []Group
		wantErr string
	}{
		{name: "python-written with path", data: string(readTestdata(t, "groups.csv")), want: []Group{
			{Name: "core", Repos: []string{"net-kingdom", "railiance-platform"}},
			{Name: "src", Repos: []string{"flagged", "net-kingdom"}, Path: "/home/u/src"},
			{Name: "colon", Repos: []string{"flagged"}, Path: "/mnt/a:b"},
		}},
		{name: "python-written two columns", data: string(readTestdata(t, "groups-two-column.csv")), want: []Group{
			{Name: "core", Repos: []string{"net-kingdom", "railiance-platform"}},
			{Name: "solo", Repos: []string{"flagged"}},
		}},
		{name: "group without repos", data: "empty\r\n", want: []Group{{Name: "empty", Repos: []string{}}}},
		{name: "LF and blank lines", data: "\na:x y\n\nb:z:/p\n", want: []Group{
			{Name: "a", Repos: []string{"x", "y"}}, {Name: "b", Repos: []string{"z"}, Path: "/p"},
		}},
		{name: "empty", data: ""},
		{name: "too many fields", data: "a:x:/p\r\nb:y:/p:q\r\n", wantErr: file + ":2: row has 4 fields, want name:repos[:path]"},
		{name: "empty name", data: ":x:\r\n", wantErr: file + ":1: empty group name"},
		{name: "duplicate", data: "a:x:\r\nb:y:\r\na:z:\r\n", wantErr: file + ":3: duplicate group 'a' (first on line 1)"},
		{name: "unterminated quote", data: "a:x:\r\nb:y:\"/p\r\n", wantErr: file + `:2: quoted field not closed, or text after its closing "`},
		{name: "escape in a group name", data: "a:x:\r\nevil\x1b]0;t\x07:y:\r\n", wantErr: file + `:2: group name 'evil\x1b]0;t\x07' cannot be used: it has the control or format character U+001B at byte 4`},
		{name: "bidi in a member", data: "a:x y\u202e:\r\n", wantErr: file + `:1: repo name 'y\u202e' in group 'a' cannot be used: it has the control or format character U+202E at byte 1`},
		{name: "escape in a group path", data: "a:x:/p\x1b[201~\r\n", wantErr: file + `:1: group path '/p\x1b[201~' cannot be used: it has the control or format character U+001B at byte 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseGroups(file, []byte(tt.data))
			if tt.wantErr != "" {
				if !errs.Is(err, errs.RegistryError) || err.Error() != tt.wantErr {
					t.Fatalf("parseGroups(%q) = %+v, %v; want error %q", tt.data, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseGroups: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parseGroups(%q)\n got %+v\nwant %+v", tt.data, got, tt.want)
			}
		})
	}
}
