package textsafe

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"http://user:secret@127.0.0.1:8080":              "http://REDACTED@127.0.0.1:8080",
		"https://ghp_secret@api.github.com/":             "https://REDACTED@api.github.com/",
		"http://127.0.0.1:8080/?token=secret&x=1":        "http://127.0.0.1:8080/?token=REDACTED&x=1",
		"https://h/p?access_token=secret&API_KEY=secret": "https://h/p?access_token=REDACTED&API_KEY=REDACTED",
		"https://h/p?password=secret&sig=secret":         "https://h/p?password=REDACTED&sig=REDACTED",
		"https://h/cb#access_token=secret&state=1":       "https://h/cb#access_token=REDACTED&state=1",
		"unix://u:secret@/run/statehub.sock":             "unix://REDACTED@/run/statehub.sock",
		"unix:///run/user/1000/statehub.sock":            "unix:///run/user/1000/statehub.sock",
		"http://127.0.0.1:8000":                          "http://127.0.0.1:8000",
		"https://api.github.com":                         "https://api.github.com",
		// Not a URL (bad port, bad escape): redacted by its shape.
		"http://u:secret@h:port/x":  "http://REDACTED@h:port/x",
		"http://h/%zz?token=secret": "http://h/%zz?token=REDACTED",
	}
	for in, want := range cases {
		got := RedactURL(in)
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("RedactURL(%q) = %q keeps the secret", in, got)
		}
	}
}
