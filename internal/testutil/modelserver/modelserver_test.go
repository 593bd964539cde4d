package modelserver

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// event is one server-sent event.
type event struct {
	Name string
	Data map[string]any
}

func post(t *testing.T, url string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readEvents(t *testing.T, resp *http.Response) []event {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var evs []event
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data of %s: %v", name, err)
			}
			if d["type"] != name {
				t.Errorf("event %s has type %v", name, d["type"])
			}
			evs = append(evs, event{name, d})
		}
	}
	return evs
}

func names(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

// get reads a dotted path (numbers index lists) out of decoded JSON.
func get(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := 0
			for _, c := range k {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func script(dir string) []Step {
	return []Step{
		Run("touch " + dir + "/one.txt"),
		{Text: "Now two.", Command: "touch " + dir + "/two.txt"},
		Say("Finished."),
	}
}

var wake = regexp.MustCompile(`wake: steps in (\S+)`)

func wakeRule() Rule {
	return Rule{Regexp: wake, Steps: func(p string) []Step { return script(wake.FindStringSubmatch(p)[1]) }}
}

// claudeBody is a request as Claude Code sends it: a system reminder
// before the prompt, the Bash tool, then the turns after it.
func claudeBody(prompt string, stream bool, after ...map[string]any) map[string]any {
	msgs := []any{
		map[string]any{"role": "user", "content": "an older prompt: wake: steps in /old"},
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "OK."}}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>\nbe nice\n</system-reminder>\n"},
			map[string]any{"type": "text", "text": prompt},
		}},
	}
	for _, m := range after {
		msgs = append(msgs, m)
	}
	return map[string]any{"model": "claude-opus-5-5", "stream": stream, "max_tokens": 1000, "messages": msgs,
		"tools": []any{map[string]any{"name": "Read"}, map[string]any{"name": "Bash"}}}
}

// claudeTurn is the assistant's tool call and the user's tool result.
func claudeTurn(id, result string) []map[string]any {
	return []map[string]any{
		{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}}}},
		{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": result, "is_error": false}}},
	}
}

func TestClaudeStreamsTheScript(t *testing.T) {
	s := Start(t, wakeRule())
	prompt := "wake: steps in /tmp/x"

	evs := readEvents(t, post(t, s.URL+"/v1/messages", claudeBody(prompt, true)))
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v", names(evs), want)
	}
	if get(evs[0].Data, "message.role") != "assistant" || get(evs[0].Data, "message.usage.input_tokens") == nil {
		t.Errorf("message_start %v", evs[0].Data)
	}
	block := evs[1].Data["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "Bash" || !strings.HasPrefix(block["id"].(string), "toolu_") {
		t.Errorf("content_block_start %v", block)
	}
	var input string
	for _, e := range evs[2:4] {
		if get(e.Data, "delta.type") != "input_json_delta" {
			t.Errorf("delta %v", e.Data)
		}
		input += get(e.Data, "delta.partial_json").(string)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(input), &args); err != nil || args["command"] != "touch /tmp/x/one.txt" || args["description"] == "" {
		t.Errorf("tool input %q (%v)", input, err)
	}
	if get(evs[5].Data, "delta.stop_reason") != "tool_use" || get(evs[5].Data, "usage.output_tokens") == nil {
		t.Errorf("message_delta %v", evs[5].Data)
	}

	// One result: the second step, text then the tool call.
	id := block["id"].(string)
	evs = readEvents(t, post(t, s.URL+"/v1/messages", claudeBody(prompt, true, claudeTurn(id, "(Bash completed with no output)")...)))
	want = []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v", names(evs), want)
	}
	if get(evs[2].Data, "delta.type") != "text_delta" || get(evs[2].Data, "delta.text") != "Now two." {
		t.Errorf("text delta %v", evs[2].Data)
	}
	if get(evs[4].Data, "index") != 1.0 || get(evs[4].Data, "content_block.id") == id {
		t.Errorf("second tool_use block %v", evs[4].Data)
	}

	// Two results: the final text ends the turn.
	turns := append(claudeTurn(id, "ok"), claudeTurn("toolu_2", "ok")...)
	evs = readEvents(t, post(t, s.URL+"/v1/messages", claudeBody(prompt, true, turns...)))
	if get(evs[2].Data, "delta.text") != "Finished." || get(evs[len(evs)-2].Data, "delta.stop_reason") != "end_turn" {
		t.Errorf("final events %v", evs)
	}

	rs := s.Requests()
	if len(rs) != 3 {
		t.Fatalf("%d requests recorded", len(rs))
	}
	for i, r := range rs {
		if r.Agent != Claude || r.Path != "/v1/messages" || r.Prompt != prompt || r.Rule != 0 || !r.Stream || r.Shell != "Bash" || len(r.ToolResults) != i {
			t.Errorf("request %d: %+v", i, r)
		}
	}
	if rs[1].ToolResults[0] != "(Bash completed with no output)" {
		t.Errorf("tool results %q", rs[1].ToolResults)
	}
	if got := s.ToolCalls(Claude); !slices.Equal(got, []string{"touch /tmp/x/one.txt", "touch /tmp/x/two.txt"}) {
		t.Errorf("ToolCalls %q", got)
	}
	if log := s.Log(); !strings.Contains(log, `prompt="wake: steps in /tmp/x" rule=0`) || !strings.Contains(log, "say Finished.") {
		t.Errorf("log:\n%s", log)
	}
}

func TestClaudeCallsWithoutStreaming(t *testing.T) {
	s := Start(t, wakeRule())
	var msg map[string]any
	json.NewDecoder(post(t, s.URL+"/v1/messages", claudeBody("wake: steps in /y", false)).Body).Decode(&msg)
	if msg["type"] != "message" || msg["stop_reason"] != "tool_use" || get(msg, "content.0.input.command") != "touch /y/one.txt" {
		t.Errorf("message %v", msg)
	}

	// A helper call (no tools) about the same prompt gets the plain reply,
	// shaped as its output format asks.
	body := claudeBody("wake: steps in /y", false)
	delete(body, "tools")
	body["output_config"] = map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{
		"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}}
	msg = nil
	json.NewDecoder(post(t, s.URL+"/v1/messages", body).Body).Decode(&msg)
	if msg["stop_reason"] != "end_turn" || get(msg, "content.0.text") != `{"title":"OK."}` {
		t.Errorf("helper message %v", msg)
	}

	var count map[string]any
	json.NewDecoder(post(t, s.URL+"/v1/messages/count_tokens", claudeBody("x", false)).Body).Decode(&count)
	if n, _ := count["input_tokens"].(float64); n <= 0 {
		t.Errorf("count_tokens %v", count)
	}
	rs := s.Requests()
	if rs[1].Rule != -1 || rs[1].Shell != "" || rs[2].Reply != "count_tokens" {
		t.Errorf("requests:\n%s", s.Log())
	}
}

func TestUnmatchedPromptGetsAShortReply(t *testing.T) {
	s := Start(t, wakeRule(), On("never"))
	evs := readEvents(t, post(t, s.URL+"/v1/messages", claudeBody("hello there", true)))
	if len(evs) != 6 || get(evs[2].Data, "delta.text") != "OK." || get(evs[4].Data, "delta.stop_reason") != "end_turn" {
		t.Errorf("events %v", evs)
	}
	evs = readEvents(t, post(t, s.URL+"/v1/responses", codexBody("hello there", shellTools["exec_command"])))
	if get(evs[len(evs)-1].Data, "response.output.0.content.0.text") != "OK." {
		t.Errorf("events %v", evs)
	}
	for _, r := range s.Requests() {
		if r.Rule != -1 || r.Prompt != "hello there" {
			t.Errorf("request %+v", r)
		}
	}

	s2 := Start(t)
	s2.Unmatched = "Nothing to do."
	evs = readEvents(t, post(t, s2.URL+"/v1/responses", codexBody("hello there", shellTools["exec_command"])))
	if get(evs[len(evs)-1].Data, "response.output.0.content.0.text") != "Nothing to do." {
		t.Errorf("events %v", evs)
	}
}

// shellTools are the shell tools Codex may offer, as it declares them.
var shellTools = map[string]map[string]any{
	"exec_command": {"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"cmd": map[string]any{"type": "string"}, "workdir": map[string]any{"type": "string"}}}},
	"shell_command": {"type": "function", "name": "shell_command", "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"command": map[string]any{"type": "string"}}}},
	"shell": {"type": "function", "name": "shell", "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"command": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}}},
	"local_shell": {"type": "local_shell"},
}

// codexBody is a request as Codex sends it: developer instructions, an
// environment context, the prompt, then the turns after it.
func codexBody(prompt string, shell map[string]any, after ...map[string]any) map[string]any {
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are Codex."}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>\n  <cwd>/r</cwd>\n</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
	}
	for _, it := range after {
		input = append(input, it)
	}
	tools := []any{map[string]any{"type": "function", "name": "view_image", "parameters": map[string]any{}}}
	if shell != nil {
		tools = append(tools, shell)
	}
	return map[string]any{"model": "gpt-5-codex", "stream": true, "input": input, "tools": tools}
}

func codexTurn(callID, output string) []map[string]any {
	return []map[string]any{
		{"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": callID},
		{"type": "function_call_output", "call_id": callID, "output": output},
	}
}

func TestCodexStreamsTheScript(t *testing.T) {
	s := Start(t, wakeRule())
	prompt := "wake: steps in /tmp/c"
	evs := readEvents(t, post(t, s.URL+"/v1/responses", codexBody(prompt, shellTools["exec_command"])))
	want := []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v", names(evs), want)
	}
	item := evs[5].Data["item"].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "exec_command" || item["arguments"] != `{"cmd":"touch /tmp/c/one.txt"}` || item["call_id"] == "" {
		t.Errorf("function call %v", item)
	}
	done := evs[6].Data["response"].(map[string]any)
	if done["status"] != "completed" || get(done, "usage.total_tokens") == nil || get(done, "output.0.call_id") != item["call_id"] {
		t.Errorf("response.completed %v", done)
	}
	for i, e := range evs {
		if e.Data["sequence_number"] != float64(i) {
			t.Errorf("event %d sequence_number %v", i, e.Data["sequence_number"])
		}
	}

	// A retry of the same request gets the same call.
	evs = readEvents(t, post(t, s.URL+"/v1/responses", codexBody(prompt, shellTools["exec_command"])))
	if get(evs[5].Data, "item.call_id") != item["call_id"] {
		t.Errorf("a retry got %v", evs[5].Data)
	}

	// One output: text then the second call.
	evs = readEvents(t, post(t, s.URL+"/v1/responses", codexBody(prompt, shellTools["exec_command"], codexTurn(item["call_id"].(string), "Process exited with code 0")...)))
	want = []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if !slices.Equal(names(evs), want) {
		t.Fatalf("events %v, want %v", names(evs), want)
	}
	if evs[4].Data["delta"] != "Now two." || get(evs[7].Data, "item.content.0.text") != "Now two." || get(evs[11].Data, "item.arguments") != `{"cmd":"touch /tmp/c/two.txt"}` {
		t.Errorf("second step %v", evs)
	}

	// Two outputs: the final text.
	turns := append(codexTurn("call_1", "ok"), codexTurn("call_2", "ok")...)
	evs = readEvents(t, post(t, s.URL+"/v1/responses", codexBody(prompt, shellTools["exec_command"], turns...)))
	if get(evs[len(evs)-1].Data, "response.output.0.content.0.text") != "Finished." || len(get(evs[len(evs)-1].Data, "response.output").([]any)) != 1 {
		t.Errorf("final %v", evs[len(evs)-1].Data)
	}

	rs := s.Requests()
	for i, n := range []int{0, 0, 1, 2} {
		if r := rs[i]; r.Agent != Codex || r.Prompt != prompt || r.Rule != 0 || r.Shell != "exec_command" || len(r.ToolResults) != n {
			t.Errorf("request %d: %+v", i, r)
		}
	}
	if rs[2].ToolResults[0] != "Process exited with code 0" {
		t.Errorf("tool results %q", rs[2].ToolResults)
	}
}

func TestCodexShellShapes(t *testing.T) {
	s := Start(t, wakeRule())
	for name, want := range map[string]string{
		"shell_command": `{"command":"touch /s/one.txt"}`,
		"shell":         `{"command":["bash","-lc","touch /s/one.txt"]}`,
	} {
		evs := readEvents(t, post(t, s.URL+"/v1/responses", codexBody("wake: steps in /s", shellTools[name])))
		if item := evs[len(evs)-2].Data["item"].(map[string]any); item["name"] != name || item["arguments"] != want {
			t.Errorf("%s: %v", name, item)
		}
	}
	evs := readEvents(t, post(t, s.URL+"/v1/responses", codexBody("wake: steps in /s", shellTools["local_shell"])))
	item := evs[len(evs)-2].Data["item"].(map[string]any)
	if item["type"] != "local_shell_call" || get(item, "action.command.2") != "touch /s/one.txt" {
		t.Errorf("local_shell: %v", item)
	}
	// Offered several, it prefers shell_command.
	body := codexBody("wake: steps in /s", shellTools["shell"])
	body["tools"] = append(body["tools"].([]any), shellTools["shell_command"], shellTools["exec_command"])
	evs = readEvents(t, post(t, s.URL+"/v1/responses", body))
	if get(evs[len(evs)-2].Data, "item.name") != "shell_command" {
		t.Errorf("several shells: %v", evs[len(evs)-2].Data)
	}
}

func TestCodexHelperCalls(t *testing.T) {
	s := Start(t, wakeRule())
	// Codex's thread title: the prompt quoted, no tools, a JSON schema.
	body := codexBody("Generate a concise title.\n\nUser prompt:\nwake: steps in /t", nil)
	body["tools"] = []any{}
	body["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "strict": true, "schema": map[string]any{
		"type": "object", "required": []string{"title"}, "additionalProperties": false,
		"properties": map[string]any{"title": map[string]any{"type": "string", "minLength": 1, "maxLength": 2}}}}}
	evs := readEvents(t, post(t, s.URL+"/v1/responses", body))
	if got := get(evs[len(evs)-1].Data, "response.output.0.content.0.text"); got != `{"title":"OK"}` {
		t.Errorf("title %v", got)
	}
	if r := s.Requests()[0]; r.Rule != -1 || r.Shell != "" {
		t.Errorf("request %+v", r)
	}

	for _, probe := range []struct{ method, path string }{{"GET", "/v1/models"}, {"HEAD", "/"}, {"GET", "/anything"}} {
		req, _ := http.NewRequest(probe.method, s.URL+probe.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s %s: %d %s", probe.method, probe.path, resp.StatusCode, b)
		}
		if probe.path == "/v1/models" && !strings.Contains(string(b), `"data"`) {
			t.Errorf("models: %s", b)
		}
	}
	if r := s.Requests(); len(r) != 4 || r[1].Path != "/v1/models" || r[2].Method != "HEAD" {
		t.Errorf("requests:\n%s", s.Log())
	}
}

func TestRuleMatching(t *testing.T) {
	for _, c := range []struct {
		rule   Rule
		prompt string
		want   bool
	}{
		{On("wake"), "a wake up", true},
		{On("wake"), "asleep", false},
		{Rule{Regexp: regexp.MustCompile(`^go \d+$`)}, "go 12", true},
		{Rule{Contains: "go", Regexp: regexp.MustCompile(`\d`)}, "go on", false},
		{Rule{}, "anything", false},
	} {
		if got := c.rule.matches(c.prompt); got != c.want {
			t.Errorf("%+v matches %q: %v", c.rule, c.prompt, got)
		}
	}
	// A Say step ends the script; past the end comes the plain reply.
	s := New(On("x", Say("first"), Run("never")))
	defer s.Close()
	if st, i := s.script("x", 0, true); st.Text != "first" || i != 0 {
		t.Errorf("step 0: %+v %d", st, i)
	}
	if st, _ := s.script("x", 5, true); st != Say("OK.") {
		t.Errorf("past the end: %+v", st)
	}
}

// Claude Code hands the model a bracketed paste wrapped in a tag; the text
// inside is the prompt.
func TestClaudePasteIsThePrompt(t *testing.T) {
	var req anthropicRequest
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":[
		{"type":"text","text":"<system-reminder>\nctx\n</system-reminder>"},
		{"type":"text","text":"\n\n<pasted_content id=\"8361\">\nFrom:x: wake up\nline 2\n</pasted_content id=\"8361\">\n"}]}]}`), &req); err != nil {
		t.Fatal(err)
	}
	if p, _ := claudePrompt(req); p != "From:x: wake up\nline 2" {
		t.Errorf("prompt %q", p)
	}
}
