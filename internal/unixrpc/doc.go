// Package unixrpc is the transport of our local services: JSON requests and
// answers in newline-terminated frames over a Unix socket, version
// negotiation, error codes, the peer checks both ends make, the client, and
// the service's authenticated listener and request loop (Listen, Server) with
// the long-lived connections a client holds (Dial, OpenStream for the
// broker's stream). It knows no program: each passes its Names (for messages
// and hints) and its own operations, which live with the program (tamq's in
// internal/tamqapi). See docs/protocol.md.
package unixrpc
