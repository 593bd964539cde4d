// Package layout guards how the module's packages stand to each other: the
// two programs side by side, internal/tamq and internal/engine, neither
// importing the other's packages (not even in a test), and what they share
// below both (tamqapi, tamqclient, queue, jsonl, engineapi, engineclient,
// lease, prompt); internal/config below both as well. It holds only tests.
package layout
