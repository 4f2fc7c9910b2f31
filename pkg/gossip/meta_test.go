package gossip

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{},
		{Name: "cp-1", Roles: []string{"controlPlane", "coordinator"}, Version: "v0.3.1-4-gabc", ClientURL: "http://10.0.0.1:2379", Generation: "42", Health: HealthOK | HealthEtcd | HealthVoter},
		{Name: "w", Roles: []string{"worker"}, Health: HealthOK},
	} {
		b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
	}
}

func TestMetaCompact(t *testing.T) {
	m := Meta{Name: "cp-1", Roles: []string{"controlPlane"}, Version: "v1.2.3", ClientURL: "https://10.0.0.1:2379", Generation: "117", Health: HealthOK}
	b, _ := m.Encode()
	if len(b) > 50 {
		t.Errorf("typical metadata takes %d bytes, want at most 50", len(b))
	}
}

func TestMetaTooLargeIsRefused(t *testing.T) {
	m := Meta{Name: "n", Generation: strings.Repeat("g", 600)}
	_, err := m.Encode()
	if !errors.Is(err, ErrMetaTooLarge) || !strings.Contains(err.Error(), "generation 600 bytes") {
		t.Fatalf("err = %v, want ErrMetaTooLarge naming the generation", err)
	}
}

func TestMetaUnknownRole(t *testing.T) {
	if _, err := (Meta{Roles: []string{"pilot"}}).Encode(); !errors.Is(err, ErrMetaInvalid) {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeMetaBad(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":       nil,
		"short":       {1, 0},
		"new version": {2, 0, 0, 0, 0, 0, 0},
		"role bit":    {1, 0x80, 0, 0, 0, 0, 0},
		"truncated":   {1, 0, 0, 5, 'a'},
		"huge length": {1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := DecodeMeta(b); !errors.Is(err, ErrMetaInvalid) {
			t.Errorf("%s: err = %v, want ErrMetaInvalid", name, err)
		}
	}
}

func TestDecodeMetaIgnoresAppendedFields(t *testing.T) {
	b, _ := Meta{Name: "a"}.Encode()
	m, err := DecodeMeta(append(b, 7, 'x'))
	if err != nil || m.Name != "a" {
		t.Fatalf("m=%+v err=%v", m, err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	b, _ := Meta{Name: "cp-1", Roles: []string{"worker"}, ClientURL: "http://x:2379"}.Encode()
	f.Add(b)
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrMetaInvalid) {
				t.Fatalf("error %v does not wrap ErrMetaInvalid", err)
			}
			return
		}
		again, err := m.Encode()
		if err != nil {
			if errors.Is(err, ErrMetaTooLarge) && len(b) > MaxMetaSize {
				return
			}
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		m2, err := DecodeMeta(again)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode: %+v vs %+v (%v)", m, m2, err)
		}
	})
}

func TestDeriveKey(t *testing.T) {
	a, _ := DeriveKey([]byte("token"), 0)
	b, _ := DeriveKey([]byte("token"), 1)
	c, _ := DeriveKey([]byte("other"), 0)
	a2, _ := DeriveKey([]byte("token"), 0)
	if len(a) != KeySize || string(a) == string(b) || string(a) == string(c) || string(a) != string(a2) {
		t.Fatal("keys must be 32 bytes, deterministic, and differ by token and generation")
	}
	if _, err := DeriveKey(nil, 0); !errors.Is(err, ErrBadKey) {
		t.Fatal(err)
	}
	if err := CheckKey(make([]byte, 20)); !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), "20 bytes") {
		t.Fatal(err)
	}
}
