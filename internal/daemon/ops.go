package daemon

import "time"

// The operations every service of ours answers, whatever its program: they
// are what a launcher needs to start, find and stop it. docs/protocol.md
// describes each.
const (
	OpHello    = "hello"
	OpPing     = "ping"
	OpShutdown = "shutdown"
)

// HelloArgs introduces a client.
type HelloArgs struct {
	Client        string `json:"client"`         // e.g. "tamq-cli"
	ClientVersion string `json:"client_version"` // the client's build version
}

// HelloResult is the negotiated protocol and what the service offers.
type HelloResult struct {
	Server        string   `json:"server"`
	ServerVersion string   `json:"server_version"`
	Proto         string   `json:"proto"` // negotiated
	Capabilities  []string `json:"capabilities"`
}

// PingResult proves the service is alive and says which one answered.
type PingResult struct {
	PID           int       `json:"pid"`
	StartedAt     time.Time `json:"started_at"`
	ServerVersion string    `json:"server_version"`
	Proto         string    `json:"proto"`
}

// ShutdownResult acknowledges a stop request; the service then stops within
// the grace period.
type ShutdownResult struct {
	PID          int     `json:"pid"`
	GraceSeconds float64 `json:"grace_seconds"`
}
