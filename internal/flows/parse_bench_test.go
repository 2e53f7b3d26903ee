package flows_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/flows"
)

// largestFlow is a definition at the bounds: 50 steps, a branch of 10 cases
// each holding 4 steps, conditions with 100-value "in" lists, keys and a digest.
func largestFlow() []byte {
	var b strings.Builder
	b.WriteString(`{"category":"bench","steps":[{"type":"throttle","limit":5,"window":"1h","key":"{{.project}}/{{.thread_id}}"},`)
	b.WriteString(`{"type":"send","id":"first","template_id":"t","channels":["in_app","email"]},{"type":"branch","id":"b","cases":[`)
	values := `"v0"` + strings.Repeat(`,"vvvvvvvvvv"`, 99)
	for c := 0; c < 10; c++ {
		if c > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"if":{"field":"data.x%d","op":"in","value":[%s]},"steps":[{"type":"delay","duration":"1m"},`+
			`{"type":"send","id":"s%d","template_id":"t","channels":["in_app"]},{"type":"wait","step":"s%d","timeout":"1h"},`+
			`{"type":"send","template_id":"t","channels":["email"]}]}`, c, values, c, c)
	}
	b.WriteString(`]},{"type":"digest","mode":"sliding","window":"10m","max_wait":"1h","key":"{{.thread_id}}","max_items":1000,"items":20}`)
	for i := 0; i < 6; i++ {
		b.WriteString(`,{"type":"send","template_id":"t","channels":["in_app"]}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkParseLargestFlow is what the strictest definition costs to check on
// PUT /v1/flows, against its floor: plain encoding/json decoding of the same
// bytes into the same type (no paths, no rules).
//
//	go test -run '^$' -bench 'ParseLargestFlow' -benchmem ./internal/flows/
func BenchmarkParseLargestFlow(b *testing.B) {
	raw := largestFlow()
	def, err := flows.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	steps := 0
	var count func([]flows.Step)
	count = func(ss []flows.Step) {
		for _, s := range ss {
			steps++
			for _, c := range s.Cases {
				count(c.Steps)
			}
			count(s.Else)
		}
	}
	count(def.Steps)
	if steps != flows.MaxSteps {
		b.Fatalf("the benchmark flow has %d steps, want %d", steps, flows.MaxSteps)
	}
	b.Logf("%d bytes, %d steps", len(raw), steps)
	b.Run("floor_json_unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			var d flows.Definition
			if err := json.Unmarshal(raw, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := flows.Parse(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
