package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

func greetingTemplate() Template {
	return Template{
		ID: "greeting", Version: 3, Category: "marketing",
		Email: &EmailContent{
			Subject: "Hi {{.name}}, your {{.plan}} offer",
			HTML:    "<h1>Hello {{.user.first_name}} {{ .user.last_name }}</h1>\n<p>Your plan: <b>{{$.plan}}</b>. {{.name}}!</p>",
			Text:    "Hello {{.user.first_name}} {{.user.last_name}}\nYour plan: {{.plan}}. {{.name}}!",
		},
		Locales: map[string]Variant{"de": {Email: &EmailContent{Subject: "Hallo {{.name}}"}}},
	}
}

func greetingData(name, first, last, plan string) map[string]any {
	return map[string]any{"name": name, "plan": plan, "user": map[string]any{"first_name": first, "last_name": last}}
}

// substitute applies subs to s one key after another in the given order, as a
// provider may: a batchable recipient's result may not depend on the order.
func substitute(s string, subs map[string]string, order []string) string {
	for _, k := range order {
		s = strings.ReplaceAll(s, k, subs[k])
	}
	return s
}

// checkBatchable asserts data is batchable with s and that the skeleton with
// the substitutions, applied in several orders, is the recipient's own render.
func checkBatchable(t *testing.T, s *EmailSkeleton, tpl Template, locale string, data map[string]any) map[string]string {
	t.Helper()
	r, err := Render(tpl, herald.ChannelEmail, locale, data)
	if err != nil {
		t.Fatal(err)
	}
	subs, ok := s.Substitutions(r, data)
	if !ok {
		t.Fatalf("not batchable: %v\nskeleton %q / %q / %q\nrender %q / %q / %q", data, s.Subject, s.HTML, s.Text,
			r.Email.Subject, r.Email.HTML, r.Email.Text)
	}
	checkApplies(t, s, subs, r)
	return subs
}

func checkApplies(t *testing.T, s *EmailSkeleton, subs map[string]string, r Rendered) {
	t.Helper()
	keys := make([]string, 0, len(subs))
	for k := range subs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rev := append([]string(nil), keys...)
	sort.Sort(sort.Reverse(sort.StringSlice(rev)))
	for _, order := range [][]string{keys, rev} {
		got := RenderedEmail{Subject: substitute(s.Subject, subs, order), HTML: substitute(s.HTML, subs, order), Text: substitute(s.Text, subs, order)}
		if got != *r.Email {
			t.Fatalf("skeleton with substitutions\n%+v\nis not the render\n%+v", got, *r.Email)
		}
	}
}

func mustSkeleton(t *testing.T, tpl Template, locale string, shared map[string]any) *EmailSkeleton {
	t.Helper()
	s, err := NewEmailSkeleton(tpl, locale, shared)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEmailSkeletonTokensAndSubstitutions(t *testing.T) {
	tpl := greetingTemplate()
	s := mustSkeleton(t, tpl, "en", nil)
	if s.TemplateID != "greeting" || s.Version != 3 || s.Locale != "en" || len(s.Key) != 32 {
		t.Fatalf("skeleton %+v", s)
	}
	for _, part := range []string{s.Subject, s.HTML, s.Text} {
		if !strings.Contains(part, "-"+s.nonce+"-") {
			t.Fatalf("part without a token: %q", part)
		}
	}
	// Deterministic: the same template gives the same skeleton.
	if again := mustSkeleton(t, tpl, "en", nil); again.Key != s.Key || again.Subject != s.Subject || again.HTML != s.HTML {
		t.Fatalf("second skeleton differs: %+v vs %+v", again, s)
	}
	subs := checkBatchable(t, s, tpl, "en", greetingData("Ada", "Ada", "Lovelace", "pro"))
	// name and plan are in subject, text and html (two tokens each), first and
	// last name in text and html.
	if len(subs) != 8 {
		t.Fatalf("%d substitutions, want 8: %v", len(subs), subs)
	}
	checkBatchable(t, s, tpl, "en", greetingData("Bob", "Bob", "", "free"))
	// Numbers print as Render prints them.
	checkBatchable(t, s, tpl, "en", map[string]any{"name": json.Number("12345678901234567890"), "plan": json.Number("19.90"),
		"user": map[string]any{"first_name": 7, "last_name": 1.5}})
	// Another locale is another skeleton; a render for one is not batchable with the other.
	de := mustSkeleton(t, tpl, "de-AT", nil)
	if de.Locale != "de" || de.Key == s.Key {
		t.Fatalf("de skeleton %+v", de)
	}
	checkBatchable(t, de, tpl, "de", greetingData("Clara", "Clara", "Z", "pro"))
	r, _ := Render(tpl, herald.ChannelEmail, "de", greetingData("Clara", "Clara", "Z", "pro"))
	if _, ok := s.Substitutions(r, greetingData("Clara", "Clara", "Z", "pro")); ok {
		t.Fatal("a de render is batchable with the en skeleton")
	}
	other := tpl
	other.Version = 4
	if r, _ := Render(other, herald.ChannelEmail, "en", greetingData("A", "B", "C", "D")); func() bool {
		_, ok := s.Substitutions(r, greetingData("A", "B", "C", "D"))
		return ok
	}() {
		t.Fatal("a render of another version is batchable")
	}
}

func TestEmailSkeletonEscapesHTMLNotText(t *testing.T) {
	tpl := greetingTemplate()
	s := mustSkeleton(t, tpl, "en", nil)
	evil := `<script>alert("x&y")</script> O'Brien + co`
	data := greetingData(evil, evil, "L", "pro")
	subs := checkBatchable(t, s, tpl, "en", data)
	r, _ := Render(tpl, herald.ChannelEmail, "en", data)
	if strings.Contains(r.Email.HTML, "<script>") || !strings.Contains(r.Email.Text, evil) || !strings.Contains(r.Email.Subject, evil) {
		t.Fatalf("render %+v", r.Email)
	}
	var raw, escaped int
	for _, v := range subs {
		switch {
		case v == evil:
			raw++
		case strings.Contains(v, "&lt;script&gt;"):
			escaped++
		}
	}
	if raw != 2 || escaped != 2 { // name and first_name, each raw for subject/text, escaped for html
		t.Fatalf("substitutions %q", subs)
	}
}

func TestEmailSkeletonRefusesLogic(t *testing.T) {
	cases := map[string]EmailContent{
		"if":          {Subject: "Hi", Text: "{{if .vip}}VIP{{end}} {{.name}}"},
		"if in html":  {Subject: "Hi", HTML: "<p>{{if .vip}}VIP{{else}}you{{end}}</p>"},
		"range":       {Subject: "Hi", Text: "{{range .items}}{{.}}{{end}}"},
		"with":        {Subject: "Hi", Text: "{{with .user}}{{.name}}{{end}}"},
		"pipeline":    {Subject: "Hi {{.name | upper}}", Text: "x"},
		"function":    {Subject: "Hi", Text: "{{upper .name}}"},
		"printf":      {Subject: "Hi", Text: `{{printf "%s" .name}}`},
		"variable":    {Subject: "Hi", Text: "{{$n := .name}}{{$n}}"},
		"dot":         {Subject: "Hi", Text: "{{.}}"},
		"constant":    {Subject: "Hi", Text: `{{"x"}}`},
		"index":       {Subject: "Hi", Text: `{{index . "name"}}`},
		"whole/field": {Subject: "{{.user}}", Text: "{{.user.name}}"},
	}
	for name, c := range cases {
		tpl := Template{ID: "t", Version: 1, Email: &c}
		if _, err := NewEmailSkeleton(tpl, "en", nil); !errors.Is(err, ErrNotBatchable) {
			t.Errorf("%s: err = %v, want ErrNotBatchable", name, err)
		}
	}
	if _, err := NewEmailSkeleton(Template{ID: "t", SMS: &SMSContent{Text: "x"}}, "en", nil); !errors.Is(err, ErrChannelNotInTemplate) {
		t.Errorf("no email: %v", err)
	}
	// A conditional names itself.
	_, err := NewEmailSkeleton(Template{ID: "t", Email: &EmailContent{Subject: "Hi", Text: "a\n{{if .x}}b{{end}}"}}, "en", nil)
	if err == nil || !strings.Contains(err.Error(), "email.text line 2") || !strings.Contains(err.Error(), "conditional") {
		t.Errorf("err = %v", err)
	}
}

func TestEmailSkeletonWithoutVariables(t *testing.T) {
	tpl := Template{ID: "t", Version: 1, Email: &EmailContent{Subject: "News", HTML: "<p>Same for all</p>", Text: "Same for all"}}
	s := mustSkeleton(t, tpl, "en", nil)
	subs := checkBatchable(t, s, tpl, "en", map[string]any{"unused": "x"})
	if len(subs) != 0 || s.Subject != "News" {
		t.Fatalf("subs %v skeleton %+v", subs, s)
	}
}

func TestEmailSkeletonTokenCollisionFallsBack(t *testing.T) {
	tpl := greetingTemplate()
	s := mustSkeleton(t, tpl, "en", nil)
	tok := s.fields[0].textToken
	for _, v := range []string{tok, "x" + tok + "y", s.nonce, "-" + s.nonce + "-99-"} {
		data := greetingData(v, "A", "B", "pro")
		r, err := Render(tpl, herald.ChannelEmail, "en", data)
		if err != nil {
			t.Fatal(err)
		}
		if subs, ok := s.Substitutions(r, data); ok {
			t.Errorf("value %q colliding with the tokens is batchable: %v", v, subs)
		}
	}
	// A value that ends like a token's start and is followed by another token:
	// no nonce in the render, so still batchable (and order-independent).
	checkBatchable(t, s, tpl, "en", greetingData("-hs", "A-", "-B", "-"))
}

func TestEmailSkeletonContexts(t *testing.T) {
	tpl := Template{ID: "t", Version: 1, Email: &EmailContent{
		Subject: "{{.name}}",
		HTML:    `<p title="{{.name}}">Hi {{.name}}</p><a href="https://shop.example/u/{{.slug}}">{{.slug}}</a>`,
		// (bluemonday keeps a title of letters, digits, spaces and some punctuation)
	}}
	s := mustSkeleton(t, tpl, "en", nil)
	// Plain values escape alike in attributes, URLs and text: batchable.
	checkBatchable(t, s, tpl, "en", map[string]any{"name": "Ada O'Brien", "slug": "ada-42"})
	// A value the sanitizer drops from the attribute but keeps in the text: not batchable.
	data := map[string]any{"name": "Ada & Bob", "slug": "ada-42"}
	if r, _ := Render(tpl, herald.ChannelEmail, "en", data); func() bool { _, ok := s.Substitutions(r, data); return ok }() {
		t.Fatalf("a value dropped from an attribute is batchable: %q", r.Email.HTML)
	}
	// A space in a URL is %20 there but not in the text: not batchable.
	data = map[string]any{"name": "Ada", "slug": "a b"}
	r, err := Render(tpl, herald.ChannelEmail, "en", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Substitutions(r, data); ok {
		t.Fatalf("a URL-escaped value is batchable: %q", r.Email.HTML)
	}
}

func TestEmailSkeletonSubjectLineBreaks(t *testing.T) {
	// In the subject only: the value is folded as the subject is.
	only := Template{ID: "t", Version: 1, Email: &EmailContent{Subject: "Re: {{.topic}} today", Text: "Hello"}}
	s := mustSkeleton(t, only, "en", nil)
	checkBatchable(t, s, only, "en", map[string]any{"topic": "a\r\nb\nc"})
	// In subject and text, a line break cannot be both: not batchable.
	both := Template{ID: "t", Version: 1, Email: &EmailContent{Subject: "Re: {{.topic}}", Text: "{{.topic}}"}}
	s = mustSkeleton(t, both, "en", nil)
	checkBatchable(t, s, both, "en", map[string]any{"topic": "one line"})
	data := map[string]any{"topic": "two\nlines"}
	r, _ := Render(both, herald.ChannelEmail, "en", data)
	if _, ok := s.Substitutions(r, data); ok {
		t.Fatal("a line break in subject and text is batchable")
	}
	// Leading space at the subject's start is trimmed by Render: not batchable.
	data = map[string]any{"topic": " x"}
	lead := Template{ID: "t", Version: 1, Email: &EmailContent{Subject: "{{.topic}}", Text: "Hello"}}
	s = mustSkeleton(t, lead, "en", nil)
	r, _ = Render(lead, herald.ChannelEmail, "en", data)
	if _, ok := s.Substitutions(r, data); ok {
		t.Fatal("a trimmed subject value is batchable")
	}
}

func TestEmailSkeletonSizeLimit(t *testing.T) {
	tpl := greetingTemplate()
	s := mustSkeleton(t, tpl, "en", nil)
	big := strings.Repeat("x", MaxSubstitutionBytes/2)
	data := greetingData(big, "A", "B", "pro") // name: subject/text and html
	r, err := Render(tpl, herald.ChannelEmail, "en", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Substitutions(r, data); ok {
		t.Fatal("substitutions over MaxSubstitutionBytes are batchable")
	}
	small := strings.Repeat("x", MaxSubstitutionBytes/5)
	checkBatchable(t, s, tpl, "en", greetingData(small, "A", "B", "pro"))

	// So many variables that the tokens alone exceed the limit.
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "{{.v%d}}", i)
	}
	many := Template{ID: "t", Version: 1, Email: &EmailContent{Subject: "x", Text: b.String()}}
	if _, err := NewEmailSkeleton(many, "en", nil); !errors.Is(err, ErrNotBatchable) {
		t.Fatalf("1,000 variables: %v", err)
	}
}

func TestEmailSkeletonShared(t *testing.T) {
	tpl := greetingTemplate()
	shared := map[string]any{"plan": "pro", "user": map[string]any{"first_name": "X"}} // user lacks last_name: stays a token
	s := mustSkeleton(t, tpl, "en", shared)
	if !strings.Contains(s.Subject, "your pro offer") {
		t.Fatalf("shared plan not in the skeleton: %q", s.Subject)
	}
	subs := checkBatchable(t, s, tpl, "en", greetingData("Ada", "Ada", "L", "pro"))
	if len(subs) != 6 { // name ×2, first_name ×2, last_name ×2
		t.Fatalf("subs %v", subs)
	}
	// A recipient whose own data overrides a shared value is not batchable.
	data := greetingData("Ada", "Ada", "L", "basic")
	r, _ := Render(tpl, herald.ChannelEmail, "en", data)
	if _, ok := s.Substitutions(r, data); ok {
		t.Fatal("a recipient with another plan is batchable with the shared plan")
	}
}

func TestEmailSkeletonMissingVariable(t *testing.T) {
	tpl := greetingTemplate()
	s := mustSkeleton(t, tpl, "en", nil)
	data := greetingData("Ada", "Ada", "L", "pro")
	r, _ := Render(tpl, herald.ChannelEmail, "en", data)
	delete(data, "plan")
	if _, ok := s.Substitutions(r, data); ok {
		t.Fatal("data without a variable is batchable")
	}
}

// TestEmailSkeletonRandomValues: whatever the values, a recipient reported
// batchable gets exactly their own render, in any substitution order. (Many
// random values are not batchable here: a line break in a variable the subject
// and the text share, white space at the subject's ends, a value in the title
// attribute or the URL that escapes or sanitizes differently there.)
func TestEmailSkeletonRandomValues(t *testing.T) {
	cases := []struct {
		email EmailContent
		min   int // batchable of 2,000, at least
	}{
		{EmailContent{Subject: "Re: {{.a}} and {{.b}}.", HTML: "<p>{{.a}}-{{.b}}</p><p>&amp;{{.c}};</p>", Text: "{{.a}}{{.b}}\r\n{{.c}}"}, 800},
		{EmailContent{Subject: "{{.a}}", HTML: `<p title="{{.b}}">{{.b}}</p><a href="/x?q={{.c}}">{{.a}}{{.c}}</a>`, Text: "{{.a}}{{.c}}"}, 40},
	}
	for _, c := range cases {
		tpl := Template{ID: "t", Version: 1, Email: &c.email}
		s := mustSkeleton(t, tpl, "en", nil)
		alphabet := []string{"a", "Z", "0", "-", "h", "s", " ", "\n", "\r", "<", ">", "&", "amp;", "'", `"`, "+", "é", "🙂", "%", "#", "=",
			"<b>", "</p>", "<script>", s.nonce[:4], s.nonce[4:], s.nonce}
		rng := rand.New(rand.NewSource(1))
		word := func() string {
			var b strings.Builder
			for n := rng.Intn(6); n > 0; n-- {
				b.WriteString(alphabet[rng.Intn(len(alphabet))])
			}
			return b.String()
		}
		batchable := 0
		for i := 0; i < 2000; i++ {
			data := map[string]any{"a": word(), "b": word(), "c": word()}
			r, err := Render(tpl, herald.ChannelEmail, "en", data)
			if err != nil {
				continue
			}
			subs, ok := s.Substitutions(r, data)
			if !ok {
				continue
			}
			batchable++
			checkApplies(t, s, subs, r)
			for _, part := range []string{r.Email.Subject, r.Email.HTML, r.Email.Text} {
				if strings.Contains(part, s.nonce) {
					t.Fatalf("batchable render contains the nonce: %q", part)
				}
			}
		}
		if batchable < c.min {
			t.Errorf("%+v: only %d of 2,000 random recipients batchable, want %d", c.email, batchable, c.min)
		}
	}
}
