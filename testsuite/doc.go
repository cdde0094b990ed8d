// Package testsuite holds meshroll's end-to-end tests: integration tests
// that run the real worker against a real Temporal dev server, real git
// repositories and host agents on loopback, and replay tests that replay
// committed workflow histories so that a change breaking determinism fails
// the build.
//
// A new integration test, in ten lines:
//
//	func TestAMergeReachesEveryMachine(t *testing.T) {
//		t.Parallel() // each stack has a namespace of its own
//		s := newStack(t, stackOptions{
//			modules:  []string{"host"},
//			machines: []machineSpec{{name: "edge-1", tier: 1, modules: []string{"host"}}},
//		})
//		st := s.converge("host", s.commit("host"))
//		s.runs("edge-1", *st.Build)
//		s.checkJournal("edge-1")
//	}
//
// newStack is the one builder; its stackOptions say what the test needs
// beyond that: real images (images, exec), meshroll as deployed with doors
// for faults (faults: the worker binary, agents behind proxies, a
// restartable registry), a server of its own (persist, to restart it;
// uiPort, to watch its Web UI). exampleMesh is the fleet most tests use.
// Wait for a plan with s.wait (its end) or waitFor and waitUntil (a state
// or a condition on the way), all of them internal/plans' polling; assert
// every machine's journal with checkJournal. A test that looks at a page
// in Chromium loads it with openPage, which keeps the bridge engine's
// containers from changing the box's network interfaces meanwhile (see
// dockertest.HoldQuietNetwork). README.md says what each suite proves.
package testsuite
