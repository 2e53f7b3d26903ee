package activities_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/internal/flows"
)

// The engine renders a digest or throttle key by the rule the API checks it
// with at acceptance: for every value the two agree, including the ones the
// template renderer wrote differently (an object, null).
func TestRenderFlowKeyIsTheAPIRule(t *testing.T) {
	var data map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"thread":{"b":2,"a":"x"},"gone":null,"n":1.50,"s":"t1","ok":true,"list":[1,"a"]}`))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]string{
		"{{.thread}}":       `{"a":"x","b":2}`,
		"{{.gone}}":         "",
		"{{.missing}}":      "",
		"{{.n}}/{{.s}}":     "1.50/t1",
		"{{.ok}}-{{.list}}": `true-[1,"a"]`,
		"{{.thread.a}}":     "x",
		"":                  "",
	} {
		got, err := activities.RenderFlowKey(expr, data)
		if err != nil {
			t.Fatalf("RenderFlowKey(%q): %v", expr, err)
		}
		api, err := flows.RenderKey(expr, data)
		if err != nil {
			t.Fatalf("flows.RenderKey(%q): %v", expr, err)
		}
		if got != want || got != api {
			t.Errorf("RenderFlowKey(%q) = %q, API renders %q, want %q", expr, got, api, want)
		}
	}
	if _, err := activities.RenderFlowKey("{{.s}}", map[string]any{"s": strings.Repeat("k", flows.MaxRenderedKeyBytes+1)}); err == nil {
		t.Error("a key over the cap rendered; want the API's refusal, not a cut key")
	}
}
