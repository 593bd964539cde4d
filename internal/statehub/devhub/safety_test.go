package devhub_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// serve runs s as dev-statehub does (its HTTP server, its listener) on a
// loopback port, with tune applied to the server first.
func serve(t *testing.T, s *devhub.Server, tune func(*http.Server)) string {
	t.Helper()
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := s.HTTPServer()
	if tune != nil {
		tune(srv)
	}
	go srv.Serve(s.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// send makes one request; header is name, value, ...
func send(t *testing.T, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const message = `{"id":"m1","to_repo":"a","from":"b","subject":"x"}`

// Security item 7: a body must be declared JSON. A web page can POST
// text/plain (or a form) to a loopback port without asking first; it
// cannot send application/json without a preflight the server never
// grants. Nothing is created by a refused request.
func TestBodiesMustBeDeclaredJSON(t *testing.T) {
	url := serve(t, &devhub.Server{}, nil)
	for _, ct := range []string{"", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		if code, body := send(t, "POST", url+"/v1/messages", message, "Content-Type", ct); code != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") {
			t.Errorf("Content-Type %q: %d %s", ct, code, body)
		}
	}
	if _, body := send(t, "GET", url+"/v1/messages", ""); strings.Contains(body, "m1") {
		t.Fatalf("a refused body made a message: %s", body)
	}
	if code, body := send(t, "POST", url+"/v1/messages", message, "Content-Type", "application/json; charset=utf-8"); code != 200 {
		t.Errorf("declared JSON: %d %s", code, body)
	}
}

// Security item 7: no browser writes across origins, even without a body
// (POST /v1/messages/{id}/read has none): what Sec-Fetch-Site or Origin say
// of a cross-origin request is refused; programs, which send neither, and
// the page's own origin are served.
func TestNoCrossOriginWrites(t *testing.T) {
	url := serve(t, &devhub.Server{}, nil)
	send(t, "POST", url+"/v1/messages", message, "Content-Type", "application/json")
	for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://evil.example"}} {
		if code, body := send(t, "POST", url+"/v1/messages/m1/read", "", h...); code != http.StatusForbidden {
			t.Errorf("%s: %d %s", h, code, body)
		}
	}
	if _, body := send(t, "GET", url+"/v1/messages?unread=true", ""); !strings.Contains(body, "m1") {
		t.Fatalf("a cross-origin request marked the message read: %s", body)
	}
	if code, body := send(t, "POST", url+"/v1/messages/m1/read", ""); code != 200 {
		t.Errorf("a program's request: %d %s", code, body)
	}
}

// Security item 7: on TCP the Host must be this machine's loopback (or the
// address the connection came in on): a DNS rebinding page's Host, a name
// of the attacker's that resolves to 127.0.0.1, is refused. Over the Unix
// socket no page can reach the server, and any Host is served.
func TestHostMustBeLoopbackOnTCP(t *testing.T) {
	url := serve(t, &devhub.Server{}, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	for _, host := range []string{"evil.example:" + port, "evil.example", "10.0.0.1:" + port, "127.0.0.1.evil.example:" + port} {
		if code, body := send(t, "GET", url+"/v1/workplans", "", "Host", host); code != http.StatusMisdirectedRequest || !strings.Contains(body, "Host") {
			t.Errorf("Host %s: %d %s", host, code, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "127.0.0.2:" + port, "[::1]:" + port} {
		if code, body := send(t, "GET", url+"/v1/workplans", "", "Host", host); code != 200 {
			t.Errorf("Host %s: %d %s", host, code, body)
		}
	}

	sock := filepath.Join(t.TempDir(), "statehub.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &devhub.Server{}
	s.Open()
	srv := s.HTTPServer()
	go srv.Serve(s.Listener(ln))
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("unix", sock)
	}}}
	resp, err := c.Get("http://anything.example/v1/workplans")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("over the socket: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// Security item 7: a body over 1 MiB is refused whole (413, saying the
// cap) and changes nothing; the document is capped too: a write that would
// take it over MaxDocument is refused (507) and the writes before it stay.
func TestBodyAndDocumentAreCapped(t *testing.T) {
	data := filepath.Join(t.TempDir(), "hub.json")
	url := serve(t, &devhub.Server{Data: data, MaxDocument: 4 << 10}, nil)
	big := `{"id":"wp1","repo":"a","status":"active","tasks":[],"intervention_notes":[{"id":"n","text":"` + strings.Repeat("x", 1<<20) + `"}]}`
	if code, body := send(t, "PUT", url+"/v1/workplans/wp1", big, "Content-Type", "application/json"); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "at most 1048576") {
		t.Errorf("a body over 1 MiB: %d %.200s", code, body)
	}
	stored := 0
	for i := range 100 {
		m := fmt.Sprintf(`{"id":"m%d","to_repo":"a","from":"b","body":"%s"}`, i, strings.Repeat("y", 500))
		code, body := send(t, "POST", url+"/v1/messages", m, "Content-Type", "application/json")
		if code == http.StatusInsufficientStorage {
			if !strings.Contains(body, "cap of 4096 bytes") {
				t.Errorf("refusal: %s", body)
			}
			break
		}
		if code != 200 {
			t.Fatalf("message %d: %d %s", i, code, body)
		}
		stored++
	}
	if stored == 0 || stored >= 10 {
		t.Fatalf("%d messages of about 550 bytes stored under a cap of 4 KiB", stored)
	}
	again := &devhub.Server{Data: data}
	if err := again.Open(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(data)
	if n := strings.Count(string(b), `"to_repo"`); n != stored || len(b) > 8<<10 {
		t.Errorf("the data file holds %d messages in %d bytes, want the %d stored", n, len(b), stored)
	}
}

// Security item 7: connections are capped; one over the cap is answered
// 503 at once and closed, and once a connection ends a new one is served.
func TestConnectionsAreCapped(t *testing.T) {
	url := serve(t, &devhub.Server{MaxConns: 2}, nil)
	addr := strings.TrimPrefix(url, "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(over).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 503") {
		t.Fatalf("one over the cap: %q %v", line, err)
	}
	held[0].Close()
	testutil.WaitFor(t, "a slot to free", func() bool {
		resp, err := http.Get(url + "/v1/workplans")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// Security issue 37 (low): with a token, connections that have not
// presented it do not count toward the cap. Another local user holding
// the cap's worth of connections open, silent or refused (401, kept
// alive), took the token holder's polls from it when every accepted
// connection counted; now each of them is served, and still when three
// times the cap's worth are held.
func TestUnauthenticatedConnectionsCannotStarveTheTokenHolder(t *testing.T) {
	const token, cap = "t0ken", 4
	url := serve(t, &devhub.Server{Token: token, MaxConns: cap}, nil)
	addr := strings.TrimPrefix(url, "http://")
	hold := func(n int) {
		for i := range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if i%2 == 0 {
				continue // silent
			}
			// Refused, and kept open: the answer says the server has it.
			io.WriteString(c, "GET /v1/workplans HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a request without the token: %d", resp.StatusCode)
			}
		}
	}
	// A new connection per poll, as a client whose idle connection was
	// closed makes.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	polls := func(held int) {
		t.Helper()
		for i := range 6 {
			req, _ := http.NewRequest("GET", url+"/v1/workplans", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("poll %d of the token holder, %d connections held: %v", i+1, held, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("poll %d of the token holder, %d connections held: %d %s", i+1, held, resp.StatusCode, b)
			}
		}
	}
	hold(cap)
	polls(cap)
	hold(2 * cap)
	polls(3 * cap)
}

// With a token the cap still holds for the connections that presented it:
// one over it is refused (503) and closed. Connections that have not
// presented it are capped apart: one over that cap closes the oldest of
// them, and one that presents nothing is closed at the pending timeout.
func TestConnectionsWithATokenAreCapped(t *testing.T) {
	const token = "t0ken"
	// dial connects to addr; its reader's reads end within 10 s.
	dial := func(addr string) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, r *bufio.Reader) int {
		t.Helper()
		io.WriteString(c, "GET /v1/workplans HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+token+"\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// closed waits until the server closes the connection r reads.
	closed := func(what string, r *bufio.Reader) {
		t.Helper()
		if _, err := io.ReadAll(r); err != nil {
			t.Errorf("%s was not closed: %v", what, err)
		}
	}

	// The pending timeout is long here: only the cap closes anything.
	addr := strings.TrimPrefix(serve(t, &devhub.Server{Token: token, MaxConns: 2, MaxPending: 2, PendingTimeout: time.Hour}, nil), "http://")
	// Two authenticated keep-alive connections take the cap.
	for range 2 {
		if code := get(dial(addr)); code != 200 {
			t.Fatalf("an authenticated request under the cap: %d", code)
		}
	}
	c, r := dial(addr)
	if code := get(c, r); code != http.StatusServiceUnavailable {
		t.Fatalf("one authenticated connection over the cap: %d", code)
	}
	closed("the connection over the cap", r)
	// Three silent connections: the first is closed when the third comes.
	_, oldest := dial(addr)
	dial(addr)
	dial(addr)
	closed("the oldest pending connection", oldest)

	// A connection that presents nothing is closed at the pending timeout.
	addr = strings.TrimPrefix(serve(t, &devhub.Server{Token: token, PendingTimeout: 200 * time.Millisecond}, nil), "http://")
	_, silent := dial(addr)
	closed("a connection that never presented the token", silent)
}

// Security item 7: a connection that sends nothing, or a request too
// slowly, is closed at the read timeout; an idle one at the idle timeout;
// an event stream outlives both.
func TestSlowAndIdleConnectionsAreClosed(t *testing.T) {
	d := (&devhub.Server{}).HTTPServer()
	if d.ReadHeaderTimeout <= 0 || d.ReadTimeout <= 0 || d.WriteTimeout <= 0 || d.IdleTimeout <= 0 || d.MaxHeaderBytes <= 0 ||
		d.ReadTimeout > time.Minute || d.IdleTimeout > 5*time.Minute {
		t.Fatalf("the server's bounds: %+v", d)
	}
	const short = 300 * time.Millisecond
	url := serve(t, &devhub.Server{}, func(srv *http.Server) {
		srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = short, short, short, short
	})
	stream, err := http.Get(url + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	silent, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	io.WriteString(silent, "GET /v1/workplans HTTP/1.1\r\n") // and never the rest
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(silent); err != nil {
		t.Errorf("a silent connection was not closed: %v", err)
	}
	// The stream is older than the silent connection: past every timeout.
	if code, body := send(t, "PUT", url+"/v1/workplans/wp1", `{"id":"wp1","repo":"a","status":"active","tasks":[]}`, "Content-Type", "application/json"); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	r := bufio.NewReader(stream.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	idle, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET /v1/workplans HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(idle); err != nil || !strings.Contains(string(b), "200 OK") {
		t.Errorf("an idle connection after its answer: %q %v", b, err)
	}
}

// Security item 7: the token of a TCP server is made at the first start
// into a new 0600 file, and the same one is read at the next; a token file
// others may read is refused.
func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "statehub.token")
	token, made, err := devhub.TokenFile(path, true)
	if err != nil || !made || len(token) != 64 {
		t.Fatalf("made: %q %v %v", token, made, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("its directory: %v %v", fi, err)
	}
	if again, made, err := devhub.TokenFile(path, true); err != nil || made || again != token {
		t.Errorf("the next start: %q %v %v", again, made, err)
	}
	os.Chmod(path, 0o644)
	if _, _, err := devhub.TokenFile(path, true); !errs.Is(err, errs.PermissionDeny) || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a token file others may read: %v", err)
	}
}
