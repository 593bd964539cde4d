package modelserver

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// geminiTurn is a Gemini API request body: a user prompt, then the model's
// calls and their responses as Gemini CLI sends them.
func geminiTurn(prompt string, outputs ...string) map[string]any {
	contents := []any{
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": "This is the Gemini CLI. We are setting up the context for our chat."}}},
		map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Got it."}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}},
	}
	for _, out := range outputs {
		contents = append(contents,
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": geminiShell, "args": map[string]any{"command": "x"}}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": geminiShell, "response": map[string]any{"output": out}}}}})
	}
	return map[string]any{
		"contents": contents,
		"tools":    []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "read_file"}, map[string]any{"name": geminiShell}}}},
	}
}

// readGeminiEvents reads the unnamed events of an alt=sse stream.
func readGeminiEvents(t *testing.T, body *bufio.Scanner) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for body.Scan() {
		if d, ok := strings.CutPrefix(strings.TrimSuffix(body.Text(), "\r"), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event data: %v", err)
			}
			evs = append(evs, m)
		}
	}
	return evs
}

// Each streamed turn answers the next step: a functionCall of
// run_shell_command while steps are left (counted by the functionResponse
// parts after the prompt), then the final text with finishReason STOP.
func TestGeminiStreamsTheScript(t *testing.T) {
	srv := Start(t, On("do the steps", Run("touch one"), Run("touch two"), Say("Done.")))
	url := srv.URL + "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"
	for i, want := range []string{"touch one", "touch two", ""} {
		resp := post(t, url, geminiTurn("please do the steps", []string{"a", "b"}[:i]...))
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		evs := readGeminiEvents(t, bufio.NewScanner(resp.Body))
		last := evs[len(evs)-1]
		if get(last, "candidates.0.finishReason") != "STOP" {
			t.Errorf("step %d: last event has no finishReason STOP: %v", i, last)
		}
		part := get(last, "candidates.0.content.parts.0")
		if want == "" {
			if get(part, "text") != "Done." {
				t.Errorf("step %d: final part %v, want the text Done.", i, part)
			}
			continue
		}
		if get(part, "functionCall.name") != geminiShell || get(part, "functionCall.args.command") != want {
			t.Errorf("step %d: part %v, want a call of %s running %q", i, part, geminiShell, want)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Agent != Gemini || reqs[0].Model != "gemini-3.1-pro-preview" || !reqs[0].Stream || reqs[0].Shell != geminiShell {
		t.Fatalf("requests recorded: %v", reqs)
	}
	if got := reqs[2].ToolResults; len(got) != 2 || got[1] != "b" {
		t.Errorf("tool results of the last request %q, want the outputs a, b", got)
	}
	if reqs[2].Prompt != "please do the steps" {
		t.Errorf("prompt %q: the context turn before it is not the prompt", reqs[2].Prompt)
	}
}

// The router's request (no tools, JSON asked for by a responseJsonSchema
// with an enum) is answered with JSON that fits the schema, not a step.
func TestGeminiRouterGetsSchemaJSON(t *testing.T) {
	srv := Start(t, On("do the steps", Run("touch one")))
	body := map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "please do the steps"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "OBJECT", "required": []string{"reasoning", "model_choice"},
			"properties": map[string]any{"reasoning": map[string]any{"type": "STRING"}, "model_choice": map[string]any{"type": "STRING", "enum": []string{"flash", "pro"}}},
		}},
	}
	resp := post(t, srv.URL+"/v1beta/models/gemini-3.5-flash-lite:generateContent", body)
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	text, _ := get(got, "candidates.0.content.parts.0.text").(string)
	var answer map[string]any
	if err := json.Unmarshal([]byte(text), &answer); err != nil || answer["model_choice"] != "flash" || answer["reasoning"] != "OK." {
		t.Errorf("router answer %q (%v), want JSON with model_choice flash", text, err)
	}
	if len(srv.ToolCalls(Gemini)) != 0 {
		t.Errorf("a request offering no shell tool was answered with a call")
	}
}
