package flows_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/flows"
)

// TestGuideExamplesAreValid parses every step and flow example in
// docs/flows.md, so the guide never shows a definition PUT would refuse. A
// flow (an object with "category") is parsed as written; a step (an object
// with "type", one or several to a block) is parsed inside a flow that has what
// it may refer to.
func TestGuideExamplesAreValid(t *testing.T) {
	doc, err := os.ReadFile("../../docs/flows.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	flowsSeen, stepsSeen := 0, 0
	for _, b := range blocks {
		dec := json.NewDecoder(bytes.NewReader(b[1]))
		for dec.More() {
			var obj map[string]json.RawMessage
			if err := dec.Decode(&obj); err != nil {
				break // not a definition (a status answer with "…" in it)
			}
			raw, _ := json.Marshal(obj)
			switch {
			case obj["category"] != nil:
				flowsSeen++
				if _, err := flows.Parse(raw); err != nil {
					t.Errorf("docs/flows.md flow %s: %v", raw, err)
				}
			case obj["type"] != nil:
				stepsSeen++
				def := `{"category":"c","steps":[{"type":"send","id":"wrapper","template_id":"t","channels":["in_app"]},` + string(raw) +
					`,{"type":"send","template_id":"t","channels":["email"]}]}`
				if _, err := flows.Parse([]byte(def)); err != nil {
					t.Errorf("docs/flows.md step %s: %v", raw, err)
				}
			}
		}
	}
	// The guide has an example of each step kind and at least one whole flow.
	for _, kind := range flows.StepTypes {
		if !strings.Contains(string(doc), `{"type":"`+string(kind)+`"`) {
			t.Errorf("docs/flows.md has no example of a %s step", kind)
		}
	}
	if flowsSeen < 1 || stepsSeen < 8 {
		t.Fatalf("found %d flows and %d steps in docs/flows.md; the examples are not being read", flowsSeen, stepsSeen)
	}
}
