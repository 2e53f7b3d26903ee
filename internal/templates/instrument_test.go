package templates

import (
	"bytes"
	htmltemplate "html/template"
	"strings"
	"testing"
	texttemplate "text/template"

	"github.com/herald-notify/herald/internal/herald"
)

// The instrumentation and the budgeted builtins must not change what a
// template renders: each source renders the same with Render as with a plain
// text/template (html/template for email html) given the same data, errors
// included (compared by whether there is one).
func TestInstrumentationKeepsSemantics(t *testing.T) {
	data := map[string]any{
		"a": "x", "b": "y", "n": int64(3), "f": 2.5, "t": true, "list": []any{"p", "q", int64(7)},
		"m": map[string]any{"k": "v", "n": int64(1)}, "empty": "", "html": `<b>"x" & 'y'</b>`, "u": "a b&c/d?é",
	}
	sources := []string{
		`{{eq .a "x"}} {{eq .a "y" "x"}} {{ne .a .b}} {{lt .a .b}} {{le .n 3}} {{gt .f 2.4}} {{ge .n .n}}`,
		`{{eq .n 3}} {{lt .n 4}} {{eq (len .list) 3}} {{if eq .t true}}T{{end}}`,
		`{{.a | eq "x"}} {{"y" | eq .b}} {{.n | lt 2}} {{index .m "k"}} {{index .list 1}} {{"k" | index .m}}`,
		`{{index . "missing"}}|{{with index . "missing"}}yes{{else}}no{{end}}|{{index .m .a}}`,
		`{{and .a .b}} {{or .empty .a}} {{not .empty}} {{and .empty .nokey}} {{or .a .nokey}}`,
		`{{slice .a 0}} {{slice .list 1 2}} {{len .a}} {{len .m}}`,
		`{{print .a .n .f}} {{println .a .b}} {{printf "%s-%d-%.1f|%5s|%-3d|%v" .a .n .f .a .n .list}}`,
		`{{html .html}} {{js .html}} {{urlquery .u}} {{html .a .n}} {{js .a .b}} {{urlquery .a .u}} {{.html | html}}`,
		`{{range $i, $e := .list}}{{$i}}={{$e}};{{end}}{{range .m}}{{.}},{{end}}{{range 3}}{{.}}{{end}}{{range .nothing}}x{{else}}none{{end}}`,
		`{{$x := "a"}}{{$x = print $x $x}}{{$x}} {{with $y := .m}}{{$y.k}}{{end}} {{(index .m "k") | printf "%q"}}`,
		`{{range .list}}{{if eq . "q"}}{{break}}{{end}}{{.}}{{end}}|{{range .list}}{{if eq . "p"}}{{continue}}{{end}}{{.}}{{end}}`,
		`{{eq .a .n}}`,      // incompatible types: an error both ways
		`{{lt .m .m}}`,      // not comparable: an error
		`{{index .list 9}}`, // out of range: an error
		`{{.nokey}}`,        // missing key: an error
		`{{eq .nokey "x"}}`, // missing key inside a wrapped operand: an error
	}
	plain := texttemplate.FuncMap{}
	for _, src := range sources {
		want, wantErr := plainText(t, src, data, plain)
		got, err := Render(Template{Category: "c", SMS: &SMSContent{Text: src + "."}}, herald.ChannelSMS, "en", data)
		switch {
		case (err != nil) != (wantErr != nil):
			t.Errorf("%s: err = %v, plain text/template err = %v", src, err, wantErr)
		case err == nil && got.SMS.Text != want+".":
			t.Errorf("%s:\n got %q\nwant %q", src, got.SMS.Text, want+".")
		}
	}
	htmlSources := []string{
		`<p title="{{.html}}">{{.html}}</p><a href="/x?q={{.u}}">{{.a}}</a>`,
		`{{html .a .n}}|{{urlquery .a .u}}|{{.html | html}}|<a href="/s?{{.u | urlquery}}">x</a>`,
		`<script>var v = {{.list}}; var s = {{.html}};</script><style>p{color:{{.a}}}</style><p>{{.a}}</p>`,
		`{{if eq .a "x"}}<b>{{index .m "k"}}</b>{{end}}{{range .list}}<i>{{.}}</i>{{end}}`,
	}
	for _, src := range htmlSources {
		want, wantErr := plainHTML(t, src, data)
		got, err := Render(Template{Category: "c", Email: &EmailContent{Subject: "s", HTML: src}}, herald.ChannelEmail, "en", data)
		switch {
		case (err != nil) != (wantErr != nil):
			t.Errorf("%s: err = %v, plain html/template err = %v", src, err, wantErr)
		case err == nil && got.Email.HTML != SanitizeEmailHTML(want):
			t.Errorf("%s:\n got %q\nwant %q", src, got.Email.HTML, SanitizeEmailHTML(want))
		}
	}
}

func plainText(t *testing.T, src string, data map[string]any, funcs texttemplate.FuncMap) (string, error) {
	t.Helper()
	tpl, err := texttemplate.New("x").Option("missingkey=error").Funcs(funcs).Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	var b bytes.Buffer
	err = tpl.Execute(&b, data)
	return b.String(), err
}

func plainHTML(t *testing.T, src string, data map[string]any) (string, error) {
	t.Helper()
	tpl, err := htmltemplate.New("x").Option("missingkey=error").Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	var b bytes.Buffer
	err = tpl.Execute(&b, data)
	return b.String(), err
}

// Ordinary templates near the limits still render: the budgets only stop
// templates that build, loop or read far beyond what a notification needs.
func TestBudgetsLeaveOrdinaryTemplatesAlone(t *testing.T) {
	// Every field of one render shares MaxRangeIterations: the html and the
	// text part loop over the items once each.
	items := make([]any, MaxRangeIterations/2-1)
	for i := range items {
		items[i] = map[string]any{"name": "item", "status": "shipped", "qty": int64(i)}
	}
	body := strings.Repeat("long text ", 6<<10) // 60 KiB
	tags := make([]any, 1000)
	for i := range tags {
		tags[i] = "tag"
	}
	data := map[string]any{"items": items, "body": body, "tags": tags, "name": "Ada"}
	tests := []struct {
		channel herald.Channel
		src     string
	}{
		{"email", `<ul>{{range .items}}<li>{{.name}} × {{.qty}}</li>{{end}}</ul>`},
		{"email", `{{range .items}}{{if eq .status "shipped"}}{{if gt .qty 4990}}<p>{{.name | upper}}</p>{{end}}{{end}}{{end}}`},
		{"sms", `{{printf "%.20s" .body}}… {{truncate 30 .body}}`},
		{"email", `<p>{{.body}}</p><p>{{upper .body}}</p><p>{{printf "%s" .body}}</p>`},
		{"sms", `{{len (join ", " .tags)}}`},
		{"sms", `{{range $i, $e := .items}}{{if lt $i 3}}{{printf "%-10s|%5d" $e.name $e.qty}};{{end}}{{end}}`},
	}
	for _, tc := range tests {
		tpl := Template{Category: "c"}
		if tc.channel == "email" {
			tpl.Email = &EmailContent{Subject: "Hi {{.name}}", HTML: tc.src, Text: tc.src}
		} else {
			tpl.SMS = &SMSContent{Text: tc.src}
		}
		if errs := Validate(tpl); len(errs) > 0 {
			t.Errorf("%s: Validate = %v", tc.src, errs)
		}
		if _, err := Render(tpl, tc.channel, "en", data); err != nil {
			t.Errorf("%s: %v", tc.src, err)
		}
	}
}
