// Package unixsock is the part of our services' transport that runs on Go's
// network poller: a service's authenticated listener and request loop
// (Listen, Server), and the long-lived connections a client holds (Dial,
// OpenStream for the broker's stream). It is apart from package protocol so
// that a command making one call links neither net nor log/slog.
package unixsock
