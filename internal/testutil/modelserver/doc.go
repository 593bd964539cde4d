// Package modelserver is a scripted model server for end-to-end tests: the
// real Claude Code, Codex and Gemini CLIs talk to it instead of their vendors'
// APIs, offline, with fake keys.
//
// It serves the Anthropic Messages API (POST /v1/messages, streamed or not,
// and /v1/messages/count_tokens) and the OpenAI Responses API (POST
// /v1/responses, streamed or not), the Gemini API (POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse
// and :countTokens), plus GET /v1/models; other GETs and HEADs
// get 200 and an empty answer, websocket upgrades 426.
//
// # Scripts
//
// A Rule matches the newest user prompt of a conversation (Contains,
// Regexp) and computes its steps from it. A Step is a shell command the
// agent runs through its shell tool (Run) or the final text that ends the
// turn (Say); a command step may carry text shown before it. The server is
// stateless: the number of tool results after the newest prompt picks the
// step, so retried requests get the same answer (tool call ids are derived
// from the prompt and the step). Past the last step, for a prompt no rule
// matches, and for a request that offers no shell tool (the agents' helper
// calls: Codex's thread title) the answer is the Unmatched text ("OK."),
// shaped as JSON when the request asks for a json_schema output. Text
// blocks wrapped in a tag (<system-reminder>, <environment_context>) and
// Codex's AGENTS.md instructions are context, not prompts. Every request is
// recorded (Requests, Log, ToolCalls); Start logs them when a test fails.
//
// # Claude Code 2.1.328 (ClaudeCodeEnv)
//
// Environment: ANTHROPIC_BASE_URL=<server URL, no /v1>, ANTHROPIC_API_KEY=
// <fake key>, DISABLE_AUTOUPDATER=1, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
// and CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 (without it,
// it resolves hosts at start to install the plugin marketplace; with all
// three its only connection is to the server, checked with strace).
//
// Files: $HOME/.claude.json with hasCompletedOnboarding: true,
// customApiKeyResponses.approved: [<last 20 characters of the key>],
// projects.<repo>.hasTrustDialogAccepted: true; $HOME/.claude/settings.json
// with permissions.disableAutoMode: "disable" (and defaultMode: "default");
// <repo>/.claude/settings.json with permissions.allow rules.
//
// Auto mode: 2.1.328 starts in "auto mode". Every /v1/messages request then
// carries a "safeguards" field (a dangerous_tool_use classifier context)
// that only Anthropic's server answers, so offline every tool call stops at
// "Auto mode can't check actions in this session". permissions.defaultMode
// "default" alone starts it in manual mode, but a later start offers "Yes,
// set auto mode as my default permission mode" in a dialog;
// disableAutoMode "disable" removes auto mode and that offer.
//
// Permissions in manual mode: a command runs unasked when a
// Bash(<exact command prefix>:*) rule allows it, but a command that writes a
// file (touch, a > redirection), even inside the project, also needs an
// Edit rule for the folder, Edit(//abs/path/**); without it Claude Code asks
// ("always allow access to <dir>"), and with the Edit rule alone it asks
// "This command requires approval".
//
// What it sends: POST /v1/messages?beta=true, streamed, model
// claude-opus-5-5, 13 tools, the shell one "Bash" with input {command,
// description}; the prompt is a user message of two text blocks, a
// <system-reminder> and the typed text; messages may hold role "system"
// entries ("# Environment update"); a tool_result's content is a string,
// "(Bash completed with no output)" for none. A bracketed paste (how tamq
// delivers) reaches the model wrapped in <pasted_content id="N">…
// </pasted_content id="N">; the text inside is the prompt. No count_tokens, title or
// probe calls were seen. Its input prompt is "❯" and a no-break space. It
// shows the prompt 1–3 s after start with the server set (not the 10–40 s
// of a bare offline start) and calls the first tool 0.2–1 s after Enter.
//
// # Codex 0.169.0 (CodexEnv)
//
// Files: $HOME/.codex/config.toml with model = "gpt-5-codex", model_provider
// = "modelserver", [model_providers.modelserver] base_url = "<URL>/v1",
// wire_api = "responses", env_key = "MODELSERVER_API_KEY";
// check_for_update_on_startup = false; [analytics] enabled = false; [tui]
// show_tooltips = false, disable_paste_burst = true; [features] plugins,
// remote_plugin, apps, daemon_auto_start = false; [projects."<repo>"]
// trust_level = "trusted". Environment: HOME and MODELSERVER_API_KEY. Flag:
// --no-daemon; otherwise it starts `codex app-server --managed-daemon` (from
// $HOME/.codex/packages) in a session of its own, which outlives the tmux
// server. `codex login --with-api-key` is not needed with this provider
// (it starts without the sign-in menu); CodexEnv still does it when given
// the binary.
//
// Other ways in: OPENAI_BASE_URL is not honoured by 0.169.0 (it went to
// api.openai.com). The config key openai_base_url = "<URL>/v1" is, with the
// built-in provider and a login; Codex then tries the Responses API over a
// websocket first (GET /v1/responses with Upgrade): the server's 426 sends
// it to HTTP at once, where a 200 made it retry for 7 s.
//
// The model: a name Codex does not know gets its fallback metadata (a
// startup warning) and plain function tools, the shell one exec_command
// with {"cmd": "..."}, whose output comes back as a function_call_output
// string ("Chunk ID: …\nWall time: …\nProcess exited with code 0\n…
// Output:\n…"). Known names differ: gpt-5.5 was switched at start to
// gpt-6-sol ("Model changed to gpt-6-sol"), whose requests have no tools
// but an additional_tools input item holding a JavaScript "exec" tool
// (code mode), which this server records and does not drive. The server
// also answers shell_command ({"command": "..."}), shell ({"command":
// ["bash", "-lc", "..."]}) and local_shell (a local_shell_call item), which
// other models are offered. Each turn also brings a title request: no
// tools, text.format a json_schema {title}, the prompt quoted in it.
//
// Approvals: in a trusted project Codex runs commands in its
// workspace-write sandbox with on-request approval: a command runs unasked,
// and one the sandbox stops just fails (no dialog, since the server never
// asks for escalation). A prefix_rule(pattern=["touch", "/x/one.txt"],
// decision="allow") in $HOME/.codex/rules/*.rules runs matching commands
// outside the sandbox, unasked: what a command needs to write outside the
// workspace or reach a Unix socket. Rules never match commands with
// redirections, substitutions, variable assignments or globs. The sandbox
// may write /tmp and $TMPDIR unless [sandbox_workspace_write]
// exclude_slash_tmp and exclude_tmpdir_env_var are set.
// --ask-for-approval never is not needed.
//
// Left over: one GET of raw.githubusercontent.com/openai/codex/main/
// announcement_tip.toml at start that no setting turns off (it fails at
// once offline). It warns that bubblewrap is not on PATH and uses its own.
// It shows its prompt under a second after start and calls the first tool
// 0.2–2 s after Enter.
//
// # Gemini CLI 0.61.0 (GeminiEnv)
//
// Environment: GOOGLE_GEMINI_BASE_URL=<server URL> (plain http is accepted
// on loopback), GEMINI_API_KEY=<fake key>, HOME. Files:
// $HOME/.gemini/settings.json with security.auth.selectedType
// "gemini-api-key" (without it the sign-in menu shows),
// general.enableAutoUpdate and enableAutoUpdateNotification false,
// privacy.usageStatisticsEnabled false; $HOME/.gemini/trustedFolders.json
// {"<repo>": "TRUST_FOLDER"} (without it the "Do you trust the files in
// this folder?" box shows); a policy file $HOME/.gemini/policies/*.toml
// with [[rule]] toolName = "run_shell_command", commandPrefix = "<command
// prefix>", decision = "allow" per command it may run unasked (any other
// asks "Allow execution of [Shell]?").
//
// What it sends, per turn: one non-streamed generateContent to a router
// model (gemini-3.5-flash-lite) with no tools and
// generationConfig.responseMimeType "application/json" and a
// responseJsonSchema ({complexity_reasoning, complexity_score}), answered
// with JSON that fits it; then streamGenerateContent?alt=sse to the chosen
// model (gemini-3.1-pro-preview) with 16 function declarations, the shell
// one run_shell_command with args {command, description}. The events are
// unnamed "data: <GenerateContentResponse>" lines; a call is a
// functionCall part, and its result comes back as a functionResponse part
// of a user turn whose response.output is "<untrusted_context>\nOutput:
// …\nProcess Group PGID: N\n</untrusted_context>". The first user turn is
// the CLI's context ("This is the Gemini CLI…"), the prompt a later one. It
// shows its prompt about 3 s after start and calls the first tool 0.2 s
// after Enter.
//
// # Typing a prompt
//
// Both agents may take an Enter that arrives before they have drawn the
// typed text as part of the input: Claude Code kept it as an invisible
// character ("Removed 1 invisible character from your prompt" on the next
// submit), Codex left the prompt unsent once while it switched models at
// start and once when running with its daemon. Wait for the text to show
// in the input, then press Enter, then wait for the request.
package modelserver
