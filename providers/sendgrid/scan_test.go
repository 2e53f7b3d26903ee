package sendgrid

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// ScanBatch must agree with ParseEvents on what a batch holds: its delivery
// events and the tenants they name.
func TestScanBatchAgreesWithParseEvents(t *testing.T) {
	batches := []string{
		`[]`,
		` [ ] `,
		`[{}]`,
		`[{"event":"delivered","tenant":"t_a"}]`,
		`[{"event":"spamreport","tenant":"t_b"},{"event":"delivered","tenant":"t_a"}]`,
		`[{"tenant":"t_a","event":"processed"},{"event":"open","tenant":"t_b"},{"event":"click","tenant":"t_c"}]`,
		`[{"event":"bounce","tenant":"t_a","reason":"\"tenant\":\"t_x\" in a string"},{"event":"dropped"}]`,
		`[{"event":"deferred","tenant":1},{"event":"delivered","tenant":""},{"event":"delivered","tenant":null}]`,
		`[{"event":"delivered","tenant":"t_a","tenant":"t_b"}]`,
		`[{"event":"delivered","pool":{"tenant":"t_nested","event":"bounce"},"tenant":"t_a"}]`,
		`[{"event":"delivered","tenant":"t_\u00e9"}, {"event" : "delivered" , "tenant" : "t_a" }]`,
		`[{"event":"delivered","tenant":"t_a","list":[1,{"x":"]"}],"s":"}{]["}]`,
	}
	for _, raw := range batches {
		got, err := ScanBatch([]byte(raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		receipts, err := ParseEvents([]byte(raw))
		if err != nil {
			t.Fatalf("%s: ParseEvents: %v", raw, err)
		}
		var tenants []string
		for _, r := range receipts {
			if r.TenantID != "" && !contains(tenants, r.TenantID) && len(tenants) < 2 {
				tenants = append(tenants, r.TenantID)
			}
		}
		if got.Events != len(receipts) || !reflect.DeepEqual(got.Tenants, tenants) {
			t.Errorf("%s: scan = %d events %q, ParseEvents = %d receipts %q", raw, got.Events, got.Tenants, len(receipts), tenants)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestScanBatchRefusesWhatIsNotAnEventArray(t *testing.T) {
	for _, raw := range []string{``, `{"not":"an array"}`, `[`, `[{"a":}]`, `[1]`, `[{},"x"]`, `[[]]`, `"[]"`, `[{}] x`} {
		if _, err := ScanBatch([]byte(raw)); !errors.Is(err, ErrNotEventArray) {
			t.Errorf("%q: err = %v, want ErrNotEventArray", raw, err)
		}
	}
}

// Scanning a 2 MiB batch allocates next to nothing, however many events it
// holds and whichever tenant they name (ParseEvents allocates hundreds of MiB
// for the same body).
func TestScanBatchAllocatesNothingPerEvent(t *testing.T) {
	for _, event := range []string{`{}`, `{"event":"delivered","tenant":"t_a"}`, `{"event":"delivered","tenant":""}`} {
		body := []byte("[" + strings.TrimSuffix(strings.Repeat(event+",", (2<<20)/(len(event)+1)), ",") + "]")
		allocs := testing.AllocsPerRun(3, func() {
			if _, err := ScanBatch(body); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 10 {
			t.Errorf("%s: %v allocations per scan, want at most 10", event, allocs)
		}
	}
}
