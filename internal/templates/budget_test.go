package templates

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	texttemplate "text/template"
)

// The escapers' lengths are computed before escaping; they must be exact, or
// a budget check would refuse what fits or let through what does not.
func TestEscapedLengthsAreExact(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	inputs := []string{"", "plain", all.String(), `<a href="x">'&'</a>` + "\x00\x01\x7f",
		"é ü 日本 😀", "\u2028\u2029\u00ad\ufeff\U000e0001\U0010ffff", "a=b&c d+e%f~g_h.i-j", strings.Repeat("<&>", 1000)}
	for _, s := range inputs {
		if got, want := htmlEscapedLen(s), len(texttemplate.HTMLEscapeString(s)); got != want {
			t.Errorf("htmlEscapedLen(%q) = %d, want %d", s, got, want)
		}
		if got, want := jsEscapedLen(s), len(texttemplate.JSEscapeString(s)); got != want {
			t.Errorf("jsEscapedLen(%q) = %d, want %d", s, got, want)
		}
		if got, want := queryEscapedLen(s), len(url.QueryEscape(s)); got != want {
			t.Errorf("queryEscapedLen(%q) = %d, want %d", s, got, want)
		}
	}
}

// One budget serves a whole render: what one field spends, the next lacks.
func TestBudgetIsSharedAcrossFields(t *testing.T) {
	// Each field builds 200 KiB (20 × a 10 KiB constant); MaxBuiltBytes
	// (1 MiB) allows five such fields, not six.
	build := `{{$x := "` + strings.Repeat("a", 10<<10) + `"}}{{$y := print` + strings.Repeat(" $x", 20) + `}}{{len $y}}`
	data := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		data[k] = build
	}
	tpl := Template{Category: "c", Push: &PushContent{Title: "t", Data: data}}
	if _, err := Render(tpl, "push", "en", nil); err != nil {
		t.Fatalf("five fields: %v", err)
	}
	data["f"] = build
	_, err := Render(tpl, "push", "en", nil)
	var re *RenderError
	if !errors.As(err, &re) || re.Field != "data.f" || !errors.Is(err, ErrBuildBudget) {
		t.Fatalf("six fields: err = %v, want ErrBuildBudget on data.f", err)
	}
}
