// Package tamqapi is tamq's service API: its operations and their argument and
// result types, as they travel over the socket protocol (internal/unixrpc).
// The CLI, the broker and coordination-engine reach the service through the
// typed client in internal/tamqclient. See docs/protocol.md.
package tamqapi

import (
	"time"

	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/queue"
)

// tamq's operations.
const (
	OpStatus    = "status"
	OpRegister  = "register"
	OpSend      = "send"
	OpAck       = "ack"
	OpRetry     = "retry"
	OpEndpoints = "endpoints"
	// OpCancel is the operator dropping a queued message, so that it is
	// never written.
	OpCancel = "cancel"
)

// EndpointWindow is one repo window of an endpoint.
type EndpointWindow struct {
	Repo     string `json:"repo"`
	RepoPath string `json:"repo_path"`
	WindowID string `json:"window_id"`
	PaneID   string `json:"pane_id"`
	Mode     string `json:"mode"`              // trigger | manual; "" on register keeps the recorded mode
	Command  string `json:"command,omitempty"` // "" runs the user's shell
	Alive    bool   `json:"alive"`
	// Broker says a broker session is attached: deliveries go through it.
	Broker bool `json:"broker"`
	// Waiting counts the messages queued for the window; WaitReason says why
	// they wait when the window cannot take them now (its agent has exited,
	// the window is closed, the agent shows a dialog).
	Waiting    int    `json:"waiting"`
	WaitReason string `json:"wait_reason,omitempty"`
	// Reused says the window existed already: on register its recorded command
	// stays (a running window's command cannot change).
	Reused bool `json:"reused,omitempty"`
	// Restarted says an open ran the command again in the window, whose
	// agent had exited (the same window and pane).
	Restarted bool `json:"restarted,omitempty"`
	// PanePID is the pane's process as an open started it (0: not known).
	PanePID int `json:"pane_pid,omitempty"`
	// Ended says how the window's agent ended, when it did: "exited" (its
	// pane is dead; ExitStatus says with what, when known) or "closed" (the
	// window was closed while its tmux server ran). A restart never brings
	// such a window back. "" while it runs, or when nothing is known.
	Ended      string `json:"ended,omitempty"`
	ExitStatus *int   `json:"exit_status,omitempty"`
}

// Liveness is a window's life in one word or a few, as status and top show
// it: alive; its agent EXITED, with the status it exited with; its window
// CLOSED; or GONE, with nothing more known (its tmux server is gone).
func (w EndpointWindow) Liveness() string {
	switch {
	case w.Alive:
		return "alive"
	case w.Ended == string(queue.AgentExited):
		status := -1
		if w.ExitStatus != nil {
			status = *w.ExitStatus
		}
		return "agent EXITED" + queue.ExitText(status)
	case w.Ended == string(queue.WindowClosed):
		return "window CLOSED"
	}
	return "GONE"
}

// Endpoint is a tmux server tamq delivers into.
type Endpoint struct {
	ID         string `json:"id"` // tmux-amq-<tmux server pid>
	TmuxSocket string `json:"tmux_socket"`
	ServerPID  int    `json:"tmux_server_pid"`
	Session    string `json:"session"`
	State      string `json:"state"` // connected | disconnected
	// Forgotten: the operator said it is gone for good (tamq endpoints
	// forget); it is kept for history only.
	Forgotten bool             `json:"forgotten,omitempty"`
	Windows   []EndpointWindow `json:"windows"`
	// Recorded: the service is not running, and this is the endpoint as it
	// last recorded it (status reads its database); only the windows' Alive
	// is asked of tmux now.
	Recorded bool `json:"recorded,omitempty"`
}

// RegisterArgs records the windows `tamq open` opened.
type RegisterArgs struct {
	Endpoint Endpoint `json:"endpoint"`
}

// SendArgs asks for one message to be queued. Text is "To:<repo>: body". The
// sender is never declared: the service derives it from the connecting
// process (its peer credentials): a process that descends from a tamq
// window's pane is that window's repo, anything else is the operator.
type SendArgs struct {
	Text string `json:"text"`
	// Operator marks a line the operator typed into a window (the broker
	// saw it): operator provenance, labelled with the window's repo. Only the
	// window's broker itself (the pane's own process) may set it.
	Operator   bool   `json:"operator,omitempty"`
	EndpointID string `json:"endpoint_id,omitempty"`
	AckMode    string `json:"ack_mode,omitempty"` // "" uses delivery_ack_mode
	// ObservedAt is when a broker saw the line, for lines it kept in its
	// spool while the service was down; they are recorded with that time.
	ObservedAt *time.Time `json:"observed_at,omitempty"`
}

// IDArgs names one message.
type IDArgs struct {
	ID string `json:"id"`
}

// Message is a message record as commands print it.
type Message struct {
	ID         string  `json:"id"`
	BatchID    string  `json:"batch_id"`
	EndpointID string  `json:"endpoint_id,omitempty"`
	Sender     string  `json:"sender"`
	SenderKind string  `json:"sender_kind"`
	Provenance string  `json:"provenance"` // "o" for operator messages, else ""
	Target     string  `json:"target"`
	Body       *string `json:"body,omitempty"`
	AckMode    string  `json:"ack_mode"`
	State      string  `json:"state"`
	Attempts   int     `json:"attempts"`
	// MaxRetries is how many redeliveries may follow the first attempt.
	MaxRetries int `json:"max_retries"`
	// MaxAttemptsV1 is MaxRetries again under the name version 1 of the
	// export gave it, max_attempts, for readers that require it
	// (docs/jsonl.md): despite its name it counts retries. Version 2 drops it.
	MaxAttemptsV1 int    `json:"max_attempts"`
	PolicyProfile string `json:"policy_profile"`
	ConfigVersion string `json:"config_version"`
	// Wakes carry the coordination lease id and trigger revision.
	IdempotencyKey         string `json:"idempotency_key,omitempty"`
	CorrelationID          string `json:"correlation_id,omitempty"`
	CoordinationEndpointID string `json:"coordination_endpoint_id,omitempty"`
	// ReplayOf is the original message a replayed one copies.
	ReplayOf      string     `json:"replay_of,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	AckDeadlineAt *time.Time `json:"ack_deadline_at,omitempty"`
	InjectedAt    *time.Time `json:"injected_at,omitempty"`
	AckedAt       *time.Time `json:"acked_at,omitempty"`
	FailedAt      *time.Time `json:"failed_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

// OpReplay queues replayed messages into an endpoint, a chunk per request.
const OpReplay = "replay"

// ReplayArgs is one chunk of a replay run. The first chunk leaves BatchID
// empty and the service names the run's batch; the following ones send it
// back. The last request of a run carries Summary (and may carry no
// entries): the service records the run's receipt from it.
type ReplayArgs struct {
	EndpointID string         `json:"endpoint_id"`
	BatchID    string         `json:"batch_id,omitempty"`
	Strict     bool           `json:"strict,omitempty"` // stop at the first rejected entry
	Entries    []ReplayEntry  `json:"entries,omitempty"`
	Summary    *ReplaySummary `json:"summary,omitempty"`
}

// ReplayEntry is one message to replay, from line Line of the file.
type ReplayEntry struct {
	Line int `json:"line"`
	// Original is the first original message: the line's replay_of when it
	// was itself a replay, else its id.
	Original               string `json:"original"`
	Sender                 string `json:"sender"`
	SenderKind             string `json:"sender_kind"`
	Target                 string `json:"target"`
	Body                   string `json:"body"`
	AckMode                string `json:"ack_mode,omitempty"`
	IdempotencyKey         string `json:"idempotency_key,omitempty"`
	CorrelationID          string `json:"correlation_id,omitempty"`
	CoordinationEndpointID string `json:"coordination_endpoint_id,omitempty"`
}

// Replay outcomes.
const (
	ReplayAccepted  = "accepted"
	ReplayDuplicate = "duplicate"
	ReplayRejected  = "rejected"
	// ReplaySkipped is a line left out on purpose, not an error: a wake
	// from coordination-engine, which an export holds but a replay must
	// not send again (Reason says why).
	ReplaySkipped = "skipped"
)

// ReplayOutcome is what became of one entry (or of one line the client could
// not read).
type ReplayOutcome struct {
	Line   int    `json:"line"`
	Status string `json:"status"`
	ID     string `json:"id,omitempty"`   // the new message, when accepted
	Code   string `json:"code,omitempty"` // the error code, when rejected
	Reason string `json:"reason,omitempty"`
}

// ReplayResult answers a chunk: the outcomes of its entries in order (under
// Strict, up to the first rejected one).
type ReplayResult struct {
	BatchID  string          `json:"batch_id"`
	Outcomes []ReplayOutcome `json:"outcomes"`
}

// ReplaySummary counts a whole run.
type ReplaySummary struct {
	Lines      int `json:"lines"`
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	Skipped    int `json:"skipped"` // wakes, left out
	Rejected   int `json:"rejected"`
}

// EndpointsResult lists endpoints.
type EndpointsResult struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// The broker session (a stream): the broker opens it with OpBrokerSession;
// the service then sends Deliver frames on it (requests with op "deliver")
// and the broker answers each with a response carrying a DeliveryOutcome.
const (
	OpBrokerSession = "broker_session"
	OpDeliver       = "deliver"
)

// BrokerSessionArgs announce the window a broker runs in.
type BrokerSessionArgs struct {
	Repo   string `json:"repo"`
	Socket string `json:"tmux_socket"`
	Pane   string `json:"pane_id"`
	// Claims says the broker takes DeliverArgs.Claim and reports its last
	// delivery in LastDelivery. A broker that predates it is sent no claim:
	// it refuses arguments it does not know.
	Claims bool `json:"claims,omitempty"`
	// LastDelivery is the broker's answer to the last delivery it was sent,
	// kept since: a service killed mid-delivery never read or recorded it,
	// and the next one settles that claim by it instead of writing its
	// messages again.
	LastDelivery *LastDelivery `json:"last_delivery,omitempty"`
}

// DeliveryClaim names what a delivery writes: its messages and when the
// service claimed them (one time for a batch), which together tell this
// claim from any other of the same messages.
type DeliveryClaim struct {
	IDs []string  `json:"ids"`
	At  time.Time `json:"at"`
}

// LastDelivery is a broker's last delivery and its answer to it.
type LastDelivery struct {
	Claim  DeliveryClaim   `json:"claim"`
	Result DeliveryOutcome `json:"result"`
}

// DeliverArgs ask the broker to write one message into its agent.
type DeliverArgs struct {
	Text    string `json:"text"`
	PauseMS int    `json:"pause_ms"`
	// Confirm are the messages the broker confirms with the service
	// (OpDeliveryCurrent) right before the first byte: wakes, which the
	// engine may cancel while the broker waits for the agent's prompt.
	Confirm []string `json:"confirm,omitempty"`
	// QuietMS and MaxWaitMS: deliver once the agent's output has been quiet
	// that long and the operator is not mid-line, but within MaxWaitMS.
	QuietMS   int `json:"quiet_ms"`
	MaxWaitMS int `json:"max_wait_ms"`
	// Claim, sent to a broker that reports its deliveries
	// (BrokerSessionArgs.Claims), is what the broker remembers of this
	// delivery with its answer.
	Claim *DeliveryClaim `json:"claim,omitempty"`
}

// OpBrokerState is a notification the broker sends on its session (a request
// frame that gets no response) whenever its view of the agent changes.
const OpBrokerState = "broker_state"

// BrokerState is the broker's view of its agent: whether the agent is at its
// input prompt, where a delivery's Enter submits the text; when not, Reason
// says what shows instead ("dialog: trust this folder?", "agent exited").
type BrokerState struct {
	AtPrompt bool `json:"at_prompt"`
	// Screen is what the agent's screen shows: "prompt" (its input box,
	// empty), "prompt-text" (text in it), "busy" (a turn runs), "starting"
	// or "dialog" (a question waits for a person, or a screen not
	// understood); "" when no agent runs. tamq acknowledges and renews a
	// wake's lease from it.
	Screen string `json:"screen,omitempty"`
	Reason string `json:"reason,omitempty"`
	// NoAgent says no agent is the foreground program of the window's
	// terminal (a shell, or another program that is neither the window's
	// command nor a known agent); Reason is then "no agent running". A
	// broker that predates it never sets it: an agent runs.
	NoAgent bool `json:"no_agent,omitempty"`
	// Program names the foreground program ("claude", "bash", "vim"), when
	// the broker could read it.
	Program string `json:"program,omitempty"`
	// Reads says the broker can tell the agent's turns (its screen rules,
	// or the agent's own Program Status Protocol reports): only then does
	// tamq acknowledge and renew a wake's lease for it.
	Reads bool `json:"reads,omitempty"`
}

// Endpoint operations beyond the listing: bring back the workspace through a
// running service, and forget an endpoint that is gone for good.
const (
	OpRestore = "restore"
	OpForget  = "forget_endpoint"
)

// EndpointsArgs filters the endpoint listing.
type EndpointsArgs struct {
	// All includes forgotten endpoints.
	All bool `json:"all,omitempty"`
}

// RestoreArgs asks the service to bring back the recorded windows of every
// tmux socket whose server runs, and of the sockets in Recreate even when
// their server is gone (it is started again).
type RestoreArgs struct {
	Recreate []string `json:"recreate,omitempty"`
}

// RestoreResult lists the endpoints whose windows were brought back.
type RestoreResult struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// ForgetResult says what forgetting an endpoint did.
type ForgetResult struct {
	EndpointID     string `json:"endpoint_id"`
	FailedMessages int    `json:"failed_messages"` // its undelivered messages, now failed (tamq retry sends them again)
}

// OpPurge plans a purge of the history, and unless DryRun carries it out:
// the service is the database's one writer, so `tamq purge` goes through it
// whenever it runs.
const OpPurge = "purge"

// PurgeArgs is the rule of `tamq purge` (docs/history.md): among the messages
// in a final state that Repo and State allow, those created before Before,
// and while the history is larger than MaxBytes the oldest others. Limit,
// when positive, takes at most that many, the oldest: the count the operator
// confirmed.
type PurgeArgs struct {
	Before   *time.Time `json:"before,omitempty"`
	MaxBytes int64      `json:"max_bytes,omitempty"`
	Repo     string     `json:"repo,omitempty"`
	State    string     `json:"state,omitempty"`
	Limit    int        `json:"limit,omitempty"`
	DryRun   bool       `json:"dry_run,omitempty"`
}

// PurgeResult is the plan (the history's size and what would go) and, unless
// it was a dry run, what was deleted.
type PurgeResult struct {
	Matching        int        `json:"matching"`
	EstimatedBytes  int64      `json:"estimated_bytes"`
	Oldest          *time.Time `json:"oldest,omitempty"`
	Newest          *time.Time `json:"newest,omitempty"`
	HistoryBytes    int64      `json:"history_bytes"`
	HistoryMessages int        `json:"history_messages"`
	HistoryReceipts int        `json:"history_receipts"`
	Deleted         int        `json:"deleted"`
	ReceiptsDeleted int        `json:"receipts_deleted"`
	PurgeID         string     `json:"purge_id,omitempty"`
	FileBytesBefore int64      `json:"file_bytes_before,omitempty"`
	FileBytesAfter  int64      `json:"file_bytes_after,omitempty"`
	// FreePagesKept: the database predates incremental auto-vacuum, so the
	// running service did not give the space back (that takes one full
	// VACUUM, which purge runs only with the service stopped).
	FreePagesKept bool `json:"free_pages_kept,omitempty"`
}

// OpDeliveryCurrent is a broker's last question before it writes a delivery
// whose messages it must confirm: are they all still being delivered (not
// cancelled since the service sent them)?
const OpDeliveryCurrent = "delivery_current"

// DeliveryCurrentArgs names the messages of a delivery.
type DeliveryCurrentArgs struct {
	IDs []string `json:"ids"`
}

// DeliveryCurrentResult says whether the delivery may go in; Reason says
// why not.
type DeliveryCurrentResult struct {
	Current bool   `json:"current"`
	Reason  string `json:"reason,omitempty"`
}

// OpWhois asks which of tamq's windows a process runs in (the pane's own
// process or one of its descendants), as tamq derives a sender:
// coordination-engine asks it of each caller, to know whose lease an agent
// may act on.
const OpWhois = "whois"

// WhoisArgs name the process.
type WhoisArgs struct {
	PID int32 `json:"pid"`
}

// WhoisResult is the window's repo; or, for a process tamq cannot place
// (near a window but not in a repo's agent pane, or under an agent outside
// tamq's windows), why not, in words that finish "you …"; both empty for
// the operator. AtShellOf names the window whose shell the operator typed
// the command at (a window whose own program is an interactive shell):
// the person, not an agent, though it runs in that window's pane.
type WhoisResult struct {
	Repo       string `json:"repo,omitempty"`
	Unverified string `json:"unverified,omitempty"`
	AtShellOf  string `json:"at_shell_of,omitempty"`
}

// Caller is who the answer says the process is.
func (r WhoisResult) Caller() door.Caller {
	switch {
	case r.Repo != "":
		return door.Caller{Kind: door.Agent, Repo: r.Repo}
	case r.Unverified != "":
		return door.Caller{Kind: door.Unverified, Why: r.Unverified}
	}
	return door.Caller{Kind: door.Operator, Repo: r.AtShellOf}
}
