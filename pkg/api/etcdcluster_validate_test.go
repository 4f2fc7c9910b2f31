package api

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validSpec() EtcdClusterSpec {
	return EtcdClusterSpec{
		Voters:  3,
		Version: "3.6.16",
		Members: []EtcdMemberSpec{{Name: "ext-1", Kind: MemberExternal,
			PeerURLs: []string{"https://10.0.0.9:2380"}, ClientURLs: []string{"https://10.0.0.9:2379"}}},
		Policy: EtcdPolicy{LearnerStartTimeout: Duration(2 * time.Minute), HealthTimeout: Duration(2 * time.Second),
			ReplaceDeadMembersAfter: Duration(10 * time.Minute), DefragFragmentation: 0.5, DefragMinDBSize: 1 << 20},
	}
}

func TestEtcdClusterSpecValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*EtcdClusterSpec)
		// want are the pieces every refusal must say (field, value,
		// accepted); nil: valid.
		want []string
	}{
		{"valid", func(*EtcdClusterSpec) {}, nil},
		{"one voter", func(s *EtcdClusterSpec) { s.Voters = 1 }, nil},
		{"seven voters", func(s *EtcdClusterSpec) { s.Voters = 7 }, nil},
		{"machine pool", func(s *EtcdClusterSpec) { s.MachinePool = "cp-vms" }, nil},
		{"machine pool not a DNS label", func(s *EtcdClusterSpec) { s.MachinePool = "CP_vms" },
			[]string{`spec.machinePool: "CP_vms" is not accepted`, "not a machine pool's name", "a DNS label"}},
		{"machine pool too long", func(s *EtcdClusterSpec) { s.MachinePool = strings.Repeat("a", 64) }, []string{"spec.machinePool", "1 to 63"}},
		{"quota 8 MiB", func(s *EtcdClusterSpec) { s.Policy.QuotaBackendBytes = 8 << 20 }, nil},
		{"quota 8 GiB", func(s *EtcdClusterSpec) { s.Policy.QuotaBackendBytes = MaxQuotaBackendBytes }, nil},
		{"no version, members or policy", func(s *EtcdClusterSpec) { s.Version, s.Members, s.Policy = "", nil, EtcdPolicy{} }, nil},
		{"http URLs", func(s *EtcdClusterSpec) {
			s.Members[0].PeerURLs, s.Members[0].ClientURLs = []string{"http://127.0.0.1:2380"}, []string{"http://127.0.0.1:2379"}
		}, nil},
		{"even voters", func(s *EtcdClusterSpec) { s.Voters = 4 },
			[]string{"spec.voters: 4 is not accepted", "an even count tolerates no more failures than the odd one below it", "4 voters can lose 1, as 3 can", "use 1, 3, 5 or 7"}},
		{"two voters", func(s *EtcdClusterSpec) { s.Voters = 2 }, []string{"spec.voters: 2", "2 voters can lose 0, as 1 can"}},
		{"zero voters", func(s *EtcdClusterSpec) { s.Voters = 0 }, []string{"spec.voters: 0 is not accepted", "at least one voter", "use 1, 3, 5 or 7"}},
		{"negative voters", func(s *EtcdClusterSpec) { s.Voters = -3 }, []string{"spec.voters: -3"}},
		{"nine voters", func(s *EtcdClusterSpec) { s.Voters = 9 }, []string{"spec.voters: 9", "more than 7"}},
		{"unknown version", func(s *EtcdClusterSpec) { s.Version = "3.9.1" }, []string{`spec.version: "3.9.1" is not accepted`, "not an etcd release nico knows", "3.6.0-3.6.16"}},
		{"malformed version", func(s *EtcdClusterSpec) { s.Version = "v3.6.16" }, []string{`spec.version: "v3.6.16"`, "MAJOR.MINOR.PATCH"}},
		{"no name", func(s *EtcdClusterSpec) { s.Members[0].Name = "" }, []string{`spec.members[0].name: "" is not accepted`, "letters, digits"}},
		{"name with =", func(s *EtcdClusterSpec) { s.Members[0].Name = "a=b" }, []string{`spec.members[0].name: "a=b"`}},
		{"wrong kind", func(s *EtcdClusterSpec) { s.Members[0].Kind = "nico" }, []string{`spec.members[0].kind: "nico" is not accepted`, `use "external"`}},
		{"no peer URLs", func(s *EtcdClusterSpec) { s.Members[0].PeerURLs = nil }, []string{"spec.members[0].peerURLs: [] is not accepted", "at least one"}},
		{"no client URLs", func(s *EtcdClusterSpec) { s.Members[0].ClientURLs = nil }, []string{"spec.members[0].clientURLs: []"}},
		{"peer URL scheme", func(s *EtcdClusterSpec) { s.Members[0].PeerURLs = []string{"unix:///run/etcd.sock"} },
			[]string{`spec.members[0].peerURLs[0]: "unix:///run/etcd.sock" is not accepted`, "not http or https", "as https://10.0.0.9:2380"}},
		{"peer URL without port", func(s *EtcdClusterSpec) { s.Members[0].PeerURLs = []string{"https://10.0.0.9"} }, []string{"spec.members[0].peerURLs[0]", "no port"}},
		{"peer URL with path", func(s *EtcdClusterSpec) { s.Members[0].PeerURLs = []string{"https://10.0.0.9:2380/x"} }, []string{"spec.members[0].peerURLs[0]", "a path"}},
		{"client URL garbage", func(s *EtcdClusterSpec) { s.Members[0].ClientURLs = []string{"https://[::1"} }, []string{"spec.members[0].clientURLs[0]", "not a URL"}},
		{"duplicate name", func(s *EtcdClusterSpec) {
			m := s.Members[0]
			m.PeerURLs, m.ClientURLs = []string{"https://10.0.0.10:2380"}, []string{"https://10.0.0.10:2379"}
			s.Members = append(s.Members, m)
		}, []string{`spec.members[1].name: "ext-1" is not accepted`, "already the name of spec.members[0]"}},
		{"duplicate URL", func(s *EtcdClusterSpec) {
			s.Members = append(s.Members, EtcdMemberSpec{Name: "ext-2", Kind: MemberExternal,
				PeerURLs: []string{"https://10.0.0.9:2380/"}, ClientURLs: []string{"https://10.0.0.10:2379"}})
		}, []string{`spec.members[1].peerURLs[0]: "https://10.0.0.9:2380/" is not accepted`, "already given as spec.members[0].peerURLs[0]"}},
		{"negative start timeout", func(s *EtcdClusterSpec) { s.Policy.LearnerStartTimeout = Duration(-time.Second) },
			[]string{"spec.policy.learnerStartTimeout: -1s is not accepted", "at least 1s"}},
		{"short progress timeout", func(s *EtcdClusterSpec) { s.Policy.LearnerProgressTimeout = Duration(time.Millisecond) },
			[]string{"spec.policy.learnerProgressTimeout: 1ms"}},
		{"long health timeout", func(s *EtcdClusterSpec) { s.Policy.HealthTimeout = Duration(time.Minute) },
			[]string{"spec.policy.healthTimeout: 1m0s is not accepted", "from 100ms to 30s"}},
		{"short dead-member replacement", func(s *EtcdClusterSpec) { s.Policy.ReplaceDeadMembersAfter = Duration(time.Second) },
			[]string{"spec.policy.replaceDeadMembersAfter: 1s", "0 (never) or at least 10s"}},
		{"fragmentation 1", func(s *EtcdClusterSpec) { s.Policy.DefragFragmentation = 1 }, []string{"spec.policy.defragFragmentation: 1 is not accepted", "below 1"}},
		{"fragmentation negative", func(s *EtcdClusterSpec) { s.Policy.DefragFragmentation = -0.1 }, []string{"spec.policy.defragFragmentation: -0.1"}},
		{"negative min db size", func(s *EtcdClusterSpec) { s.Policy.DefragMinDBSize = -1 }, []string{"spec.policy.defragMinDBSize: -1"}},
		{"short compaction retention", func(s *EtcdClusterSpec) { s.Policy.CompactionRetention = Duration(10 * time.Second) },
			[]string{"spec.policy.compactionRetention: 10s is not accepted", "use 0 (1h) or at least 1m0s"}},
		{"negative compaction retention", func(s *EtcdClusterSpec) { s.Policy.CompactionRetention = Duration(-time.Hour) },
			[]string{"spec.policy.compactionRetention: -1h0m0s is not accepted"}},
		{"negative compaction min revisions", func(s *EtcdClusterSpec) { s.Policy.CompactionMinRevisions = -5 },
			[]string{"spec.policy.compactionMinRevisions: -5 is not accepted", "0 (none beyond the retention) or more revisions"}},
		{"compaction off", func(s *EtcdClusterSpec) { s.Policy.CompactionDisabled = true }, nil},
		{"compaction off with a retention", func(s *EtcdClusterSpec) {
			s.Policy.CompactionDisabled, s.Policy.CompactionRetention = true, Duration(2*time.Hour)
		}, []string{"spec.policy.compactionRetention: 2h0m0s is not accepted", "unset it while spec.policy.compactionDisabled is true"}},
		{"compaction off with min revisions", func(s *EtcdClusterSpec) { s.Policy.CompactionDisabled, s.Policy.CompactionMinRevisions = true, 100 },
			[]string{"spec.policy.compactionMinRevisions: 100 is not accepted", "compactionDisabled"}},
		{"quota too small", func(s *EtcdClusterSpec) { s.Policy.QuotaBackendBytes = 1000 }, []string{"spec.policy.quotaBackendBytes: 1000", "from 1048576 (1 MiB) to 8589934592 (8 GiB)"}},
		{"quota too large", func(s *EtcdClusterSpec) { s.Policy.QuotaBackendBytes = 9 << 30 }, []string{"spec.policy.quotaBackendBytes: 9663676416", "etcd's default, 2147483648"}},
		{"quota negative", func(s *EtcdClusterSpec) { s.Policy.QuotaBackendBytes = -1 }, []string{"spec.policy.quotaBackendBytes: -1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validSpec()
			c.change(&s)
			err := s.Validate()
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("got %v, want ErrInvalidSpec", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%v is no *FieldError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func TestEtcdClusterSpecValidateReportsEveryField(t *testing.T) {
	s := validSpec()
	s.Voters, s.Version, s.Policy.DefragFragmentation = 2, "4.0.0", 2
	err := s.Validate()
	for _, f := range []string{"spec.voters", "spec.version", "spec.policy.defragFragmentation"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
}

func TestBootstrapDefaultIsValid(t *testing.T) {
	if err := NewEtcdCluster().Spec.Validate(); err != nil {
		t.Fatal(err)
	}
}
