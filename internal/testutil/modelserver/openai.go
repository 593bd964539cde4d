package modelserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"
)

// The OpenAI Responses API, as Codex uses it.

type responsesRequest struct {
	Model  string          `json:"model"`
	Stream bool            `json:"stream"`
	Input  json.RawMessage `json:"input"`
	Tools  []responsesTool `json:"tools"`
	Text   struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

type responsesTool struct {
	Type       string `json:"type"`
	Name       string `json:"name"`
	Parameters struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	} `json:"parameters"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Tools   []responsesTool `json:"tools"` // of an additional_tools item
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
}

// codexShells are the shell tools Codex may offer, the preferred first.
var codexShells = []string{"shell_command", "exec_command", "shell", "local_shell"}

// shellTool picks the shell tool from the offered tools.
func shellTool(tools []responsesTool) (responsesTool, bool) {
	best, found := -1, responsesTool{}
	for _, t := range tools {
		name := t.Name
		if t.Type == "local_shell" {
			name = "local_shell"
		} else if t.Type != "function" {
			continue
		}
		if i := slices.Index(codexShells, name); i >= 0 && (best < 0 || i < best) {
			best, found = i, t
		}
	}
	return found, best >= 0
}

// shellArgs are the arguments that run command with tool, from the
// tool's schema: {"cmd": "..."} (exec_command), {"command": "..."}
// (shell_command) or {"command": ["bash", "-lc", "..."]} (shell).
func shellArgs(t responsesTool, command string) map[string]any {
	props := t.Parameters.Properties
	if _, ok := props["cmd"]; ok {
		return map[string]any{"cmd": command}
	}
	if p, ok := props["command"]; ok && p.Type == "string" {
		return map[string]any{"command": command}
	}
	if t.Name == "exec_command" {
		return map[string]any{"cmd": command}
	}
	if t.Name == "shell_command" {
		return map[string]any{"command": command}
	}
	return map[string]any{"command": []string{"bash", "-lc", command}}
}

// codexPrompt finds the newest user prompt and the tool results after it.
func codexPrompt(input json.RawMessage) (prompt string, results []string) {
	var s string
	if json.Unmarshal(input, &s) == nil {
		return s, nil
	}
	var items []responsesItem
	json.Unmarshal(input, &items)
	var c conversation
	for _, it := range items {
		switch {
		case it.Type == "message" || it.Type == "" && it.Role != "":
			if it.Role == "user" {
				for _, t := range contentTexts(it.Content) {
					c.userText(t)
				}
			}
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			c.result(outputText(it.Output))
		}
		c.other()
	}
	return c.prompt, c.results
}

// contentTexts are the texts of a message's content: a string or a list
// of input_text/output_text parts.
func contentTexts(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return out
}

// outputText is a tool output: a string, a list of content parts, or an
// object holding one of those as content.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Content != nil {
		return outputText(obj.Content)
	}
	var out string
	for _, t := range contentTexts(raw) {
		out += t
	}
	return out
}

func (s *Server) responses(w http.ResponseWriter, body []byte, rec *Request) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"bad json"}}`))
		rec.Reply = "bad json: " + err.Error()
		return
	}
	rec.Model, rec.Stream = req.Model, req.Stream
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, cmpOr(t.Name, t.Type))
	}
	// Models Codex runs in "code mode" (gpt-6-sol) get their tools in an
	// additional_tools input item, wrapped in a JavaScript exec tool: the
	// server records them but does not call them.
	var input []responsesItem
	json.Unmarshal(req.Input, &input)
	for _, it := range input {
		if it.Type == "additional_tools" {
			for _, t := range it.Tools {
				rec.Tools = append(rec.Tools, "additional_tools:"+cmpOr(t.Name, t.Type))
			}
		}
	}
	tool, canRun := shellTool(req.Tools)
	if canRun {
		rec.Shell = cmpOr(tool.Name, tool.Type)
	}
	rec.Prompt, rec.ToolResults = codexPrompt(req.Input)
	step, rule := s.script(rec.Prompt, len(rec.ToolResults), canRun)
	rec.Rule = rule
	if f := req.Text.Format; f.Type == "json_schema" && step.Command == "" {
		step.Text = structured(f.Schema, step.Text)
	}
	rec.Reply = describe(step)

	n := len(rec.ToolResults)
	id := callID(rec.Prompt, n)
	var items []map[string]any
	if step.Text != "" {
		items = append(items, map[string]any{"id": "msg_" + id, "type": "message", "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": step.Text, "annotations": []any{}}}})
	}
	if step.Command != "" {
		if tool.Type == "local_shell" {
			items = append(items, map[string]any{"id": "lsh_" + id, "type": "local_shell_call", "call_id": "call_" + id, "status": "completed",
				"action": map[string]any{"type": "exec", "command": []string{"bash", "-lc", step.Command}}})
		} else {
			a := shellArgs(tool, step.Command)
			if _, ok := tool.Parameters.Properties["sandbox_permissions"]; ok && step.Escalate {
				// Codex asks the user before it runs a command outside its
				// sandbox: a permission dialog.
				a["sandbox_permissions"], a["justification"] = "require_escalated", "May I run "+step.Command+"?"
			}
			args, _ := json.Marshal(a)
			items = append(items, map[string]any{"id": "fc_" + id, "type": "function_call", "call_id": "call_" + id, "status": "completed",
				"name": tool.Name, "arguments": string(args)})
		}
	}
	respID := "resp_" + callID(string(body), 0)
	model := cmpOr(req.Model, "gpt-5-codex")
	usage := map[string]any{"input_tokens": tokens(body), "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": tokens(body) + 10}
	response := func(status string, output []map[string]any) map[string]any {
		r := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "status": status,
			"model": model, "output": output}
		if status == "completed" {
			r["usage"] = usage
		}
		return r
	}
	if !req.Stream {
		writeJSON(w, response("completed", items))
		return
	}
	e := newSSE(w)
	seq := 0
	event := func(name string, data map[string]any) {
		data["type"], data["sequence_number"] = name, seq
		seq++
		e.event(name, data)
	}
	event("response.created", map[string]any{"response": response("in_progress", []map[string]any{})})
	event("response.in_progress", map[string]any{"response": response("in_progress", []map[string]any{})})
	for i, it := range items {
		switch it["type"] {
		case "message":
			text := step.Text
			event("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"id": it["id"], "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
			event("response.content_part.added", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			event("response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "delta": text})
			event("response.output_text.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0, "text": text})
			event("response.content_part.done", map[string]any{"item_id": it["id"], "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call":
			added := map[string]any{}
			for k, v := range it {
				added[k] = v
			}
			added["status"], added["arguments"] = "in_progress", ""
			event("response.output_item.added", map[string]any{"output_index": i, "item": added})
			event("response.function_call_arguments.delta", map[string]any{"item_id": it["id"], "output_index": i, "delta": it["arguments"]})
			event("response.function_call_arguments.done", map[string]any{"item_id": it["id"], "output_index": i, "arguments": it["arguments"]})
		default:
			event("response.output_item.added", map[string]any{"output_index": i, "item": it})
		}
		event("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	event("response.completed", map[string]any{"response": response("completed", items)})
}
