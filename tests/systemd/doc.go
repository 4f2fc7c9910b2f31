// Package systemd is the real-systemd tier: the unit files nico's NixOS
// module renders run under Debian's systemd 252, booted as PID 1 of its own
// namespaces (harness), with the real nico-agent, nico-coordinator and
// nicoctl (built by the test) and etcd (the newest of NICO_ETCD_BINARIES).
// It needs root; make test runs it (CI is root), elsewhere it skips.
//
// The units are fixtures, rendered from nixos-module/ with nixpkgs' lib by
// render/default.nix (systemd-lib.nix's rules; nixpkgs' etcd unit as
// render/etcd.nix writes it) for the hosts of render/hosts.nix:
//
//	make systemd-fixtures   # re-render testdata/ after changing nixos-module/ (needs lib)
//	make nix-check          # fails when testdata/ is not what the module renders
//
// testdata/<host>/ is laid over each guest's root as is; testdata/fixture.json
// says which store path stands for which package, and the tests bind the
// real programs there (nico's bin: the built programs; etcd; Debian's
// /usr/bin and /usr/sbin for coreutils, systemd, bash, git, nix, ...).
//
// The tests, and what each shows:
//
//	TestBoot                          the harness: boot to basic.target, power off
//	TestBootstrapHost                 cp1 (bootstrap): agent READY only as a voter, etcd as
//	                                  User=etcd serving TLS only with the module's files
//	                                  (defects 1, 2), coordinator READY and leader (defect 3)
//	TestMemberDBusContract            pkg/member's TestDBusUnitsContract against real systemd
//	TestSnapshottedLearnerUnderSystemd ten learners sent a snapshot, each started by the systemd
//	                                  runtime as a Type=notify etcd unit: a lost publish is
//	                                  killed and restarted once; they serve within 3 s
//	TestJoinThroughSystemd            cp2, cp3 join through the systemd member runtime; restart
//	                                  mid-join resumes the learner; watchdog on a hung agent;
//	                                  exit 3 after removal is not restarted
//	TestCoordinatorWaitsForItsIdentity cp2's coordinator started before its agent: activating,
//	                                  waiting for its identity, READY once the agent joined,
//	                                  etcd endpoints from the mesh, NRestarts 0
//	TestAgentRestartsIntoTheNewAgent  exit 4 after a generation that installs another agent
//	TestChangedSettingsReachTheAgent  a switch to changed settings reaches the agent (defect 11)
//	TestDeclaredObjects               nico-objects applies the flake's objects once the agent is
//	                                  ready and on a switch of the manifest; nicoctl refused
//	                                  without --force; a refused manifest fails nico-objects,
//	                                  writes nothing, and leaves the agent running and starting
//	TestNixOSApplier                  the nixos applier with real Nix under systemd-run, health
//	                                  gate and rollback; Nix's cache under ProtectHome (defect 9)
//	TestParallelSwitchesTakeTheSlotOneAtATime
//	                                  cp2's switch held while cp3 joins; w1 (data plane) switches
//	                                  while cp2 holds the slot; cp2's failed switch gives the slot
//	                                  back at its 30 s hold; then cp1..cp3 run their pre-switch
//	                                  checks at once and switch: one at a time, the leader's after
//	                                  leadership moved, every slot back once healthy, the clients'
//	                                  history linearizable (porcupine), quorum never lost (sampled)
//
// Trial runs on another branch: NICO_SYSTEMD_MODULE=/its/nixos-module
// render/fixtures.sh write DIR, then NICO_SYSTEMD_FIXTURES=DIR (and
// NICO_SYSTEMD_PROGRAMS=a dir of its built programs) go test ./tests/systemd.
// NICO_SYSTEMD_JOURNAL=1 prints each guest's journal.
package systemd
