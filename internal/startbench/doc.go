// Package startbench measures what a command-line start of tamq costs against
// a hello-world Go binary started in the same run (`make bench`), and guards
// the package initialisation every tamq command pays. It holds only tests;
// docs/performance.md explains the figures.
package startbench
