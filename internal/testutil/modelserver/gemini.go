package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Gemini API (generativelanguage v1beta), as Gemini CLI uses it.

// geminiShell is the name of Gemini CLI's shell tool.
const geminiShell = "run_shell_command"

type geminiRequest struct {
	Contents []geminiContent `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

type geminiContent struct {
	Role  string `json:"role"`
	Parts []struct {
		Text             string          `json:"text"`
		Thought          bool            `json:"thought"`
		FunctionResponse *geminiFunction `json:"functionResponse"`
	} `json:"parts"`
}

type geminiFunction struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

// geminiPrompt finds the newest user prompt and the tool results after it:
// a user turn's text parts are the prompt, its functionResponse parts
// results (Gemini CLI sends a command's output as {"output": "..."}).
func geminiPrompt(req geminiRequest) (prompt string, results []string) {
	var c conversation
	for _, m := range req.Contents {
		if m.Role != "user" {
			c.other()
			continue
		}
		for _, p := range m.Parts {
			switch {
			case p.FunctionResponse != nil:
				c.result(functionOutput(p.FunctionResponse.Response))
			case p.Text != "" && !p.Thought:
				c.userText(p.Text)
			}
		}
		c.other()
	}
	return c.prompt, c.results
}

// functionOutput is a function response's output: its "output" field when
// it has one, else the whole response.
func functionOutput(raw json.RawMessage) string {
	var r struct {
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(raw, &r) == nil && r.Output != nil {
		return outputText(r.Output)
	}
	return string(raw)
}

// geminiCall splits a path's last element, "gemini-2.5-pro:generateContent",
// into the model and the method.
func geminiCall(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, ":")
}

func (s *Server) gemini(w http.ResponseWriter, r *http.Request, body []byte, rec *Request) {
	model, method, _ := geminiCall(strings.TrimSuffix(r.URL.Path, "/"))
	rec.Model = model
	if method == "countTokens" {
		writeJSON(w, map[string]any{"totalTokens": tokens(body)})
		rec.Reply = "countTokens"
		return
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":400,"message":"bad json","status":"INVALID_ARGUMENT"}}`)
		rec.Reply = "bad json: " + err.Error()
		return
	}
	rec.Stream = method == "streamGenerateContent"
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			rec.Tools = append(rec.Tools, f.Name)
			if f.Name == geminiShell {
				rec.Shell = geminiShell
			}
		}
	}
	rec.Prompt, rec.ToolResults = geminiPrompt(req)
	step, rule := s.script(rec.Prompt, len(rec.ToolResults), rec.Shell != "")
	rec.Rule = rule
	// The router's and the other helper calls ask for JSON fitting a schema.
	if g := req.GenerationConfig; g.ResponseMimeType == "application/json" && step.Command == "" {
		step.Text = structured(cmpJSON(g.ResponseJSONSchema, g.ResponseSchema), step.Text)
	}
	rec.Reply = describe(step)

	var parts []map[string]any
	if step.Text != "" {
		parts = append(parts, map[string]any{"text": step.Text})
	}
	if step.Command != "" {
		parts = append(parts, map[string]any{"functionCall": map[string]any{
			"id":   "call_" + callID(rec.Prompt, len(rec.ToolResults)),
			"name": geminiShell,
			"args": map[string]any{"command": step.Command, "description": "Run a scripted command"},
		}})
	}
	response := func(parts []map[string]any, last bool) map[string]any {
		cand := map[string]any{"index": 0, "content": map[string]any{"role": "model", "parts": parts}}
		r := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "resp_" + callID(string(body), 0)}
		if last {
			cand["finishReason"] = "STOP"
			r["usageMetadata"] = map[string]any{"promptTokenCount": tokens(body), "candidatesTokenCount": 10, "totalTokenCount": tokens(body) + 10}
		}
		return r
	}
	if !rec.Stream {
		writeJSON(w, response(parts, true))
		return
	}
	// Server-sent events without names, one GenerateContentResponse each
	// (alt=sse): the text, then the call with the finish reason.
	e := newSSE(w)
	for i, p := range parts {
		e.data(response([]map[string]any{p}, i == len(parts)-1))
	}
	if len(parts) == 0 {
		e.data(response([]map[string]any{{"text": ""}}, true))
	}
}

// cmpJSON is the first of its arguments that holds a value.
func cmpJSON(a, b json.RawMessage) json.RawMessage {
	if len(a) > 0 && string(a) != "null" {
		return a
	}
	return b
}
