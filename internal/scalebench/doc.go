// Package scalebench measures both daemons at scale with real parts (`make
// bench-scale`): a hundred windows on one tmux server, twenty tmux servers,
// coordination-engine attached and polling a reference State Hub of 10,000
// tasks. It holds only benchmarks; docs/performance.md ("Scale") explains
// the figures.
package scalebench
