package modelserver

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// The Anthropic Messages API, as Claude Code uses it.

// claudeShell is the name of Claude Code's shell tool.
const claudeShell = "Bash"

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	OutputConfig struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // of a tool_result: a string or text blocks
}

// blocks reads a message's content: a string or a list of blocks.
func blocks(raw json.RawMessage) []anthropicBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}
	}
	var bs []anthropicBlock
	json.Unmarshal(raw, &bs)
	return bs
}

// text is the text of a string or of a list of text blocks.
func text(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// claudePrompt finds the newest user prompt and the tool results after it.
func claudePrompt(req anthropicRequest) (prompt string, results []string) {
	var c conversation
	for _, m := range req.Messages {
		if m.Role != "user" {
			c.other()
			continue
		}
		for _, b := range blocks(m.Content) {
			switch b.Type {
			case "text":
				c.userText(b.Text)
			case "tool_result":
				c.result(text(b.Content))
			}
		}
		c.other()
	}
	return c.prompt, c.results
}

func (s *Server) messages(w http.ResponseWriter, body []byte, rec *Request) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		rec.Reply = "bad json: " + err.Error()
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
		if t.Name == claudeShell {
			rec.Shell = claudeShell
		}
	}
	rec.Prompt, rec.ToolResults = claudePrompt(req)
	step, rule := s.script(rec.Prompt, len(rec.ToolResults), rec.Shell != "")
	rec.Rule = rule
	if f := req.OutputConfig.Format; f.Type == "json_schema" && step.Command == "" {
		step.Text = structured(f.Schema, step.Text)
	}
	rec.Reply = describe(step)

	var content []map[string]any
	if step.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": step.Text})
	}
	stop := "end_turn"
	if step.Command != "" {
		stop = "tool_use"
		content = append(content, map[string]any{
			"type": "tool_use", "id": "toolu_" + callID(rec.Prompt, len(rec.ToolResults)), "name": claudeShell,
			"input": map[string]any{"command": step.Command, "description": "Run a scripted command"},
		})
	}
	model := cmpOr(req.Model, "claude-sonnet-4-5")
	id := "msg_" + callID(string(body), 0)
	usage := map[string]any{"input_tokens": tokens(body), "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{
			"input_tokens": tokens(body), "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	for i, b := range content {
		switch b["type"] {
		case "text":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(b["input"])
			// In two pieces, as the API streams it.
			half := len(input) / 2
			for _, part := range []string{string(input[:half]), string(input[half:])} {
				e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// describe is a step in short, for Request.Reply.
func describe(st Step) string {
	if st.Command != "" {
		return "run " + st.Command
	}
	return "say " + textsafe.Cut(st.Text, 80)
}

// conversation follows a conversation in order to find its newest user
// prompt and the tool results after it.
type conversation struct {
	prompt   string
	results  []string
	inPrompt bool // the previous part was prompt text of the same message
}

// userText takes a text part of a user message: prompt text, unless it is
// context the agent adds (system reminders, environment, instructions).
func (c *conversation) userText(s string) {
	s = unwrapPaste(s)
	if isContext(s) {
		return
	}
	if c.inPrompt {
		c.prompt += "\n" + s
		return
	}
	c.prompt, c.results, c.inPrompt = s, nil, true
}

func (c *conversation) result(s string) {
	c.results = append(c.results, s)
	c.inPrompt = false
}

// other ends a message.
func (c *conversation) other() { c.inPrompt = false }

// pastedContent is how Claude Code hands the model a bracketed paste: the
// text inside <pasted_content id="N">…</pasted_content id="N"> (2.1.328
// repeats the id in the closing tag).
var pastedContent = regexp.MustCompile(`(?s)^\s*<pasted_content[^>]*>\n?(.*?)\n?</pasted_content[^>]*>\s*$`)

// unwrapPaste is the pasted text of a paste block, or s as it is.
func unwrapPaste(s string) string {
	if m := pastedContent.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return s
}

// isContext says a user message's text is context the agent added rather
// than what the user typed: a block wrapped in a tag (Claude Code's
// <system-reminder>, Codex's <environment_context>) or Codex's AGENTS.md
// instructions.
func isContext(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasPrefix(s, "# AGENTS.md instructions") {
		return true
	}
	return strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">")
}
