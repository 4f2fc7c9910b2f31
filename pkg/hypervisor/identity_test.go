package hypervisor

import (
	"reflect"
	"testing"
)

func TestIdentityRoundTripsThroughOEMStrings(t *testing.T) {
	id := Identity{Name: "web-0", Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, Seeds: []string{"10.0.0.1:7946", "10.0.0.2"}, Roles: []string{"worker"}, Token: "s3cret", Prefix: "/nico/v1/"}
	strs := append(id.OEMStrings(), "some-vendor-string", "io.systemd.credential:other=x")
	back, err := ParseIdentity(ParseOEMStrings(strs))
	if err != nil || !reflect.DeepEqual(back, id) {
		t.Fatalf("back %+v %v", back, err)
	}
	if strs[0] != "io.systemd.credential:nico.endpoints=http://10.0.0.1:2379,http://10.0.0.2:2379" {
		t.Fatalf("first string %q", strs[0])
	}
	if _, err := ParseIdentity(map[string]string{}); err == nil {
		t.Fatal("identity without a name accepted")
	}
}

func TestMACIsStableAndLocal(t *testing.T) {
	if first, again := MAC("web-0"), MAC("web-0"); first != again || MAC("web-0") == MAC("web-1") {
		t.Fatal("MAC not a function of the name")
	}
	if m := MAC("web-0"); len(m) != 17 || m[:9] != "52:54:00:" {
		t.Fatalf("MAC %q", m)
	}
}
