package sendgrid

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// ScanBatch must agree with ParseBatch on what a batch holds: its delivery
// events and the tenants they and the suppressing events name.
func TestScanBatchAgreesWithParseEvents(t *testing.T) {
	batches := []string{
		`[]`,
		` [ ] `,
		`[{}]`,
		`[{"event":"delivered","tenant":"t_a"}]`,
		`[{"event":"spamreport","tenant":"t_b"},{"event":"delivered","tenant":"t_a"}]`,
		`[{"event":"unsubscribe","tenant":"t_b","email":"a@example.com"},{"event":"group_unsubscribe","tenant":"t_c"}]`,
		`[{"event":"bounce","type":"blocked","tenant":"t_a","email":"a@example.com"}]`,
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
		parsed, err := ParseBatch([]byte(raw))
		if err != nil {
			t.Fatalf("%s: ParseBatch: %v", raw, err)
		}
		// Suppressing events name their tenant even without an email address
		// (ParseBatch then lists nothing): decode their tags here.
		var named []string
		for _, r := range parsed.Receipts {
			named = append(named, r.TenantID)
		}
		named = append(named, suppressingTenants(t, raw)...)
		var tenants []string
		for _, id := range named {
			if id != "" && !contains(tenants, id) {
				tenants = append(tenants, id)
			}
		}
		got.Tenants = append([]string(nil), got.Tenants...)
		sort.Strings(got.Tenants)
		sort.Strings(tenants)
		if len(tenants) > 2 {
			// The scan stops at two (which two depends on order): two of them.
			if len(got.Tenants) != 2 || !contains(tenants, got.Tenants[0]) || !contains(tenants, got.Tenants[1]) {
				t.Errorf("%s: scan tenants %q, want two of %q", raw, got.Tenants, tenants)
			}
			tenants, got.Tenants = nil, nil
		}
		if got.Events != len(parsed.Receipts) || !reflect.DeepEqual(got.Tenants, tenants) {
			t.Errorf("%s: scan = %d events %q, ParseBatch = %d receipts %q", raw, got.Events, got.Tenants, len(parsed.Receipts), tenants)
		}
	}
}

// suppressingTenants decodes the tenant tags of a batch's spamreport and
// unsubscribe events.
func suppressingTenants(t *testing.T, raw string) []string {
	t.Helper()
	var events []event
	if err := json.Unmarshal([]byte(raw), &events); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events {
		if e.Event == "spamreport" || e.Event == "unsubscribe" {
			out = append(out, str(e.Tenant))
		}
	}
	return out
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
