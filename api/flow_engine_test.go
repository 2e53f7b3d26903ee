package api

import "testing"

// The engine's step paths are shown as validation errors name fields.
func TestStepPathNamesStepsAsValidationDoes(t *testing.T) {
	for engine, want := range map[string]string{
		"0":                  "steps[0]",
		"3":                  "steps[3]",
		"1.case0.2":          "steps[1].cases[0].steps[2]",
		"1.else.0":           "steps[1].else[0]",
		"2.case1.0.else.4":   "steps[2].cases[1].steps[0].else[4]",
		"0.case10.1.case0.3": "steps[0].cases[10].steps[1].cases[0].steps[3]",
	} {
		if got := stepPath(engine); got != want {
			t.Errorf("stepPath(%q) = %q, want %q", engine, got, want)
		}
	}
}
