// Package daemon is the skeleton every service of ours stands on, whatever
// its program: the checks and the lifetime lock a start makes before the
// program touches its data, the authenticated socket, the workers that run
// in the background, the ordered shutdown within a grace period, the
// readiness handshake with `start --detach`, and the launcher that starts,
// finds and stops a service. A program brings its handlers, its workers and
// its receipts (through hooks); tamq's service is internal/tamq/service.
package daemon
