package flows_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/flows"
)

func TestRenderKey(t *testing.T) {
	data := map[string]any{
		"thread_id": "t-42", "n": json.Number("9007199254740993"), "ok": true, "f": 1.5,
		"project": map[string]any{"id": "p1", "tags": []any{"b", "a"}}, "nothing": nil,
	}
	for expr, want := range map[string]string{
		"":                               "",
		"{{.thread_id}}":                 "t-42",
		"{{.project.id}}/{{.thread_id}}": "p1/t-42",
		"{{.n}}":                         "9007199254740993",
		"{{.ok}}-{{.f}}":                 "true-1.5",
		"{{.missing}}|{{.nothing}}|{{.project.id.deeper}}": "||",
		"{{.project}}": `{"id":"p1","tags":["b","a"]}`,
		"fixed":        "fixed",
	} {
		got, err := flows.RenderKey(expr, data)
		if err != nil || got != want {
			t.Errorf("RenderKey(%q) = %q, %v; want %q", expr, got, err, want)
		}
	}
	long := map[string]any{"a": strings.Repeat("x", flows.MaxRenderedKeyBytes)}
	if _, err := flows.RenderKey("{{.a}}!", long); err == nil {
		t.Error("a key over MaxRenderedKeyBytes rendered")
	}
	for _, expr := range []string{"{{.a | len}}", "{{len .a}}", "{{if .a}}x{{end}}", "{{$}}", "{{.}}", "{{template \"x\"}}", "{{define \"x\"}}y{{end}}", "{{\"lit\"}}"} {
		if _, err := flows.RenderKey(expr, data); err == nil {
			t.Errorf("RenderKey(%q) accepted", expr)
		}
		if flows.ParseKey(expr) == nil {
			t.Errorf("ParseKey(%q) accepted", expr)
		}
	}
}
