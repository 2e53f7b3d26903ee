package flows_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/jsondecode"
)

// fieldPath is what a refusal names: a body path such as steps[3].window or
// steps[1].cases[0].if.value[2], or "" for the document as a whole.
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])*(\.[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])*)*$`)

// FuzzParse feeds Parse hostile definitions: it never panics, every refusal is
// a *jsondecode.Error with a code and a well-formed field path, and whatever it
// accepts encodes to a definition it accepts again (what the store keeps and
// the engine reads back).
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 1m ./internal/flows/
func FuzzParse(f *testing.F) {
	f.Add([]byte(issueExample))
	for _, raw := range good {
		f.Add([]byte(raw))
	}
	for _, tc := range bad {
		f.Add([]byte(tc.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		def, err := flows.Parse(raw)
		if err != nil {
			var fe *jsondecode.Error
			if !errors.As(err, &fe) {
				t.Fatalf("refusal %T %v is not a *jsondecode.Error", err, err)
			}
			if fe.Code == "" || fe.Message == "" || (fe.Field != "" && !fieldPath.MatchString(fe.Field)) {
				t.Fatalf("refusal without a code, a message or a well-formed path: %+v", *fe)
			}
			return
		}
		again, err := json.Marshal(def)
		if err != nil {
			t.Fatalf("an accepted definition does not encode: %v", err)
		}
		if _, err := flows.Parse(again); err != nil {
			t.Fatalf("accepted %q, but not its encoding %s: %v", raw, again, err)
		}
	})
}
