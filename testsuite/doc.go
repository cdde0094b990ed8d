// Package testsuite holds meshroll's end-to-end tests: integration tests
// that run the real worker against a real Temporal dev server, real git
// repositories and host agents on loopback, and replay tests that replay
// committed workflow histories so that a change breaking determinism fails
// the build.
package testsuite
