package templates

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
)

func shippedData() map[string]any {
	return map[string]any{
		"name":  "Alice",
		"order": map[string]any{"id": "999"},
	}
}

func TestRenderEachChannel(t *testing.T) {
	tpl := validTemplate()

	email, err := Render(tpl, herald.ChannelEmail, "en", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if email.Email == nil || email.SMS != nil || email.Channel != "email" || email.Locale != "en" {
		t.Fatalf("email result = %+v", email)
	}
	if got, want := email.Email.Subject, "Order 999 shipped"; got != want {
		t.Errorf("subject = %q, want %q", got, want)
	}
	if got, want := email.Email.HTML, "<p>Hi Alice,</p>\n<p>your order 999 is on its way.</p>"; got != want {
		t.Errorf("html = %q, want %q", got, want)
	}
	if got, want := email.Email.Text, "Hi Alice, your order 999 is on its way."; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if email.TemplateID != "order_shipped" || email.Version != 1 {
		t.Errorf("template id/version = %q/%d", email.TemplateID, email.Version)
	}

	sms, err := Render(tpl, herald.ChannelSMS, "en", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if sms.SMS == nil || sms.SMS.Text != "Order 999 shipped" || sms.SMS.Encoding != EncodingGSM7 || sms.SMS.Segments != 1 {
		t.Errorf("sms = %+v", sms.SMS)
	}

	push, err := Render(tpl, herald.ChannelPush, "en", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if push.Push == nil || push.Push.Title != "Shipped" || push.Push.Body != "Order 999" ||
		!reflect.DeepEqual(push.Push.Data, map[string]string{"order_id": "999"}) {
		t.Errorf("push = %+v", push.Push)
	}
	wantSize := len(`{"notification":{"title":"Shipped","body":"Order 999"},"data":{"order_id":"999"}}`)
	if push.Push.PayloadBytes != wantSize {
		t.Errorf("push payload bytes = %d, want %d", push.Push.PayloadBytes, wantSize)
	}

	inApp, err := Render(tpl, herald.ChannelInApp, "en", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if inApp.InApp == nil || inApp.InApp.Body != "Order 999 shipped" || inApp.InApp.ActionURL != "https://shop.example/orders/999" {
		t.Errorf("in_app = %+v", inApp.InApp)
	}
}

func TestRenderChannelErrors(t *testing.T) {
	tpl := validTemplate()
	if _, err := Render(tpl, "fax", "en", shippedData()); !errors.Is(err, ErrUnknownChannel) {
		t.Errorf("unknown channel: err = %v", err)
	}
	tpl.SMS = nil
	if _, err := Render(tpl, herald.ChannelSMS, "en", shippedData()); !errors.Is(err, ErrChannelNotInTemplate) {
		t.Errorf("channel without content: err = %v", err)
	}
}

func TestRenderEmailEscapesDataAndSanitizes(t *testing.T) {
	tpl := Template{ID: "t", Category: "c", Email: &EmailContent{
		Subject: "Hello {{.name}}",
		HTML: `<table width="600" cellpadding="4" style="color: #333333; position: fixed">` +
			`<tr><td align="center">Hi {{.name}}</td></tr></table>` +
			`<a href="{{.url}}">link</a>` +
			`<img src="https://cdn.example/logo.png" onerror="alert(1)">` +
			`<script>alert("tenant")</script><style>p{color:red}</style>` +
			`<p onclick="steal()">{{.bio}}</p>`,
	}}
	data := map[string]any{
		"name": `<script>alert("xss")</script>`,
		"url":  `javascript:alert(1)`,
		"bio":  `"><img src=x onerror=alert(2)>`,
	}
	r, err := Render(tpl, herald.ChannelEmail, "en", data)
	if err != nil {
		t.Fatal(err)
	}
	html := r.Email.HTML
	for _, bad := range []string{"<script", "javascript:", `onerror="`, "onclick", "<style", "color:red", "position", `alert("tenant")`, "<img src=x"} {
		if strings.Contains(strings.ToLower(html), strings.ToLower(bad)) {
			t.Errorf("sanitized html contains %q:\n%s", bad, html)
		}
	}
	for _, good := range []string{
		"Hi &lt;script&gt;alert(&#34;xss&#34;)&lt;/script&gt;", // user data escaped, visible as text
		`width="600"`, `cellpadding="4"`, `align="center"`, // email layout attributes kept
		`style="color: #333333"`,                   // allowed inline style kept, position stripped
		`<img src="https://cdn.example/logo.png">`, // image kept, handler stripped
		`&#34;&gt;&lt;img src=x onerror=alert(2)&gt;`,
	} {
		if !strings.Contains(html, good) {
			t.Errorf("sanitized html lacks %q:\n%s", good, html)
		}
	}
	// The subject is text, not HTML: the data is kept verbatim (the email
	// provider encodes headers).
	if r.Email.Subject != `Hello <script>alert("xss")</script>` {
		t.Errorf("subject = %q", r.Email.Subject)
	}
}

func TestRenderEmailSubjectIsOneLine(t *testing.T) {
	tpl := Template{Category: "c", Email: &EmailContent{Subject: "Hi {{.name}}", Text: "x"}}
	r, err := Render(tpl, herald.ChannelEmail, "en", map[string]any{"name": "Eve\r\nBcc: victim@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Email.Subject, "Hi Eve Bcc: victim@example.com"; got != want {
		t.Errorf("subject = %q, want %q", got, want)
	}
}

func TestRenderMissingVariableIsAnError(t *testing.T) {
	tpl := validTemplate()
	_, err := Render(tpl, herald.ChannelSMS, "en", map[string]any{"name": "A"})
	var re *RenderError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *RenderError", err)
	}
	if re.Channel != "sms" || re.Field != "text" || !strings.Contains(err.Error(), `"order"`) {
		t.Errorf("err = %v", err)
	}
	// Nested key missing.
	_, err = Render(tpl, herald.ChannelSMS, "en", map[string]any{"order": map[string]any{"number": 1}})
	if err == nil || !strings.Contains(err.Error(), `"id"`) {
		t.Errorf("nested missing key: err = %v", err)
	}
}

func TestRenderLimits(t *testing.T) {
	sms := func(src string) Template { return Template{Category: "c", SMS: &SMSContent{Text: src}} }
	items := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	tests := []struct {
		name    string
		tpl     Template
		data    map[string]any
		wantErr error
	}{
		{"nested ranges within budget", sms(`{{range .items}}{{range $.items}}{{end}}{{end}}ok`), map[string]any{"items": items(90)}, nil},
		{"nested ranges over budget (no output at all)", sms(`{{range .items}}{{range $.items}}{{end}}{{end}}ok`), map[string]any{"items": items(200)}, ErrRenderBudget},
		{"range over a huge integer", sms(`{{range 1000000000000}}{{end}}ok`), nil, ErrRenderBudget},
		{"range over an integer from data", sms(`{{range .n}}{{end}}ok`), map[string]any{"n": 50_000}, ErrRenderBudget},
		{"budget is shared across the whole field", sms(`{{range .items}}{{end}}{{range .items}}{{end}}{{range .items}}{{end}}ok`), map[string]any{"items": items(4000)}, ErrRenderBudget},
		{"output cap", sms(`{{range .items}}{{$.big}}{{end}}`), map[string]any{"items": items(5), "big": strings.Repeat("x", 100_000)}, ErrOutputTooLarge},
		{"printf huge width", sms(`{{printf "%0999999999d" 1}}`), nil, ErrPrintfFormat},
		{"printf star width", sms(`{{printf "%*d" 1000000 1}}`), nil, ErrPrintfFormat},
		{"call disabled", sms(`{{call .f}}`), map[string]any{"f": "x"}, ErrFuncNotAllowed},
		{"sms too long", sms(`{{range .items}}0123456789{{end}}`), map[string]any{"items": items(200)}, ErrSMSTooLong},
		{"sms renders empty", sms(`{{if .x}}hi{{end}}`), map[string]any{"x": false}, ErrEmptyContent},
		{"field too large", sms(strings.Repeat("a", MaxFieldBytes+1)), nil, ErrFieldTooLarge},
		{"data not JSON", sms(`x`), map[string]any{"f": func() {}}, ErrInvalidData},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r, err := Render(tc.tpl, herald.ChannelSMS, "en", tc.data)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if r.SMS.Text != "ok" {
					t.Errorf("text = %q", r.SMS.Text)
				}
			} else if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("render took %v", d)
			}
		})
	}
}

func TestRenderPrintfAllowedFormats(t *testing.T) {
	tpl := Template{Category: "c", SMS: &SMSContent{Text: `{{printf "%05.2f|%-4s|%[1]v" .price "ab"}}`}}
	r, err := Render(tpl, herald.ChannelSMS, "en", map[string]any{"price": 3.14159})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.SMS.Text, "03.14|ab  |3.14159"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
}

func TestRenderDataIsPlainJSON(t *testing.T) {
	when := time.Date(2026, 3, 29, 10, 0, 0, 0, time.UTC)
	tpl := Template{Category: "c", SMS: &SMSContent{Text: `{{.count}} {{.price}} {{.big}} {{.when}}`}}
	r, err := Render(tpl, herald.ChannelSMS, "en", map[string]any{
		"count": 1_000_000, "price": 12.5, "big": json.Number("123456789012345678901234567890"), "when": when,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.SMS.Text, "1000000 12.5 123456789012345678901234567890 2026-03-29T10:00:00Z"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	// A time.Time in data arrives as a string: its methods are unreachable.
	tpl.SMS.Text = `{{.when.Year}}`
	if _, err := Render(tpl, herald.ChannelSMS, "en", map[string]any{"when": when}); err == nil {
		t.Error("calling a method on data succeeded, want an error")
	}
}

func TestRenderFunctions(t *testing.T) {
	tests := []struct {
		src, want string
	}{
		{`{{.name | upper}}`, "ÉMILE ZOLA"},
		{`{{.name | lower}}`, "émile zola"},
		{`{{"émile zola" | title}}`, "Émile Zola"},
		{`{{trim "  x  "}}`, "x"},
		{`{{default "friend" .empty}}`, "friend"},
		{`{{default "friend" .name}}`, "Émile Zola"},
		{`{{truncate 5 .name}}`, "Émil…"},
		{`{{truncate 50 .name}}`, "Émile Zola"},
		{`{{join ", " .tags}}`, "a, b, 3"},
		{`{{.when | date "2 Jan 2006 15:04"}}`, "29 Mar 2026 01:30"},
		{`{{.when | dateIn "Europe/Berlin" "2006-01-02 15:04 MST"}}`, "2026-03-29 03:30 CEST"},
		{`{{.day | date "Monday"}}`, "Sunday"},
		{`{{with index . "coupon"}}code {{.}}{{else}}none{{end}}`, "none"},
		{`{{len .tags}}`, "3"},
	}
	data := map[string]any{
		"name": "Émile Zola", "empty": "", "tags": []any{"a", "b", 3},
		"when": "2026-03-29T01:30:00Z", "day": "2026-03-29",
	}
	for _, tc := range tests {
		tpl := Template{Category: "c", SMS: &SMSContent{Text: tc.src}}
		r, err := Render(tpl, herald.ChannelSMS, "en", data)
		if err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if r.SMS.Text != tc.want {
			t.Errorf("%s = %q, want %q", tc.src, r.SMS.Text, tc.want)
		}
	}
}

func TestRenderPushPayloadLimit(t *testing.T) {
	tpl := Template{Category: "c", Push: &PushContent{Title: "T", Body: "{{.body}}", Data: map[string]string{"k": "v"}}}
	// Exactly at the limit passes, one byte more fails.
	overhead := PushPayloadSize("T", "", map[string]string{"k": "v"}) + len(`,"body":""`)
	atLimit := strings.Repeat("a", FCMMaxPayloadBytes-overhead)
	r, err := Render(tpl, herald.ChannelPush, "en", map[string]any{"body": atLimit})
	if err != nil {
		t.Fatalf("payload at the limit: %v", err)
	}
	if r.Push.PayloadBytes != FCMMaxPayloadBytes {
		t.Fatalf("payload bytes = %d, want exactly %d", r.Push.PayloadBytes, FCMMaxPayloadBytes)
	}
	_, err = Render(tpl, herald.ChannelPush, "en", map[string]any{"body": atLimit + "a"})
	var pe *PushPayloadTooLargeError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPushPayloadTooLarge) {
		t.Fatalf("err = %v, want *PushPayloadTooLargeError", err)
	}
	if pe.Bytes != FCMMaxPayloadBytes+1 || pe.Limit != FCMMaxPayloadBytes {
		t.Errorf("error = %+v", pe)
	}
	// Multi-byte characters count in bytes.
	if got := PushPayloadSize("é", "", nil); got != 31 { // {"notification":{"title":"é"}} with é as 2 bytes
		t.Errorf("PushPayloadSize(é) = %d, want 31", got)
	}
}

func TestRenderInAppActionURL(t *testing.T) {
	tests := []struct {
		url     string
		wantErr bool
	}{
		{"https://shop.example/orders/1", false},
		{"/orders/1", false},
		{"myapp://orders/1", false},
		{"javascript:alert(1)", true},
		{"JavaScript:alert(1)", true},
		{" javascript:alert(1)", true},
		{"java\tscript:alert(1)", true},
		{"data:text/html,<script>alert(1)</script>", true},
		{"vbscript:x", true},
	}
	for _, tc := range tests {
		tpl := Template{Category: "c", InApp: &InAppContent{Body: "b", ActionURL: "{{.url}}"}}
		_, err := Render(tpl, herald.ChannelInApp, "en", map[string]any{"url": tc.url})
		if tc.wantErr != errors.Is(err, ErrUnsafeURL) {
			t.Errorf("action_url %q: err = %v, want unsafe=%v", tc.url, err, tc.wantErr)
		}
	}
}

func TestRenderLocaleVariants(t *testing.T) {
	tpl := validTemplate()
	tpl.Locales["de-AT"] = Variant{SMS: &SMSContent{Text: "Bestellung {{.order.id}} ist unterwegs, servus"}}
	tpl.Locales["fr"] = Variant{Push: &PushContent{Body: "Commande {{.order.id}}", Data: map[string]string{"lang": "fr"}}}

	r, err := Render(tpl, herald.ChannelEmail, "de-CH", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if r.Locale != "de" || r.Email.Subject != "Bestellung 999 versandt" {
		t.Errorf("de-CH → locale %q subject %q", r.Locale, r.Email.Subject)
	}
	// Fields the variant leaves empty fall back to the base content.
	if r.Email.Text != "Hi Alice, your order 999 is on its way." {
		t.Errorf("inherited text = %q", r.Email.Text)
	}

	r, err = Render(tpl, herald.ChannelSMS, "de_at", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if r.Locale != "de-AT" || r.SMS.Text != "Bestellung 999 ist unterwegs, servus" {
		t.Errorf("de_at → %q %q", r.Locale, r.SMS.Text)
	}

	r, err = Render(tpl, herald.ChannelPush, "fr-CA", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if r.Locale != "fr" || r.Push.Title != "Shipped" || r.Push.Body != "Commande 999" ||
		!reflect.DeepEqual(r.Push.Data, map[string]string{"order_id": "999", "lang": "fr"}) {
		t.Errorf("fr push = %+v (locale %q)", r.Push, r.Locale)
	}

	r, err = Render(tpl, herald.ChannelSMS, "ja", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	if r.Locale != "en" || r.SMS.Text != "Order 999 shipped" {
		t.Errorf("ja → %q %q", r.Locale, r.SMS.Text)
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	tpl := validTemplate()
	tpl.Push.Data = map[string]string{"a": "{{.name}}", "b": "{{.order.id}}", "c": "x", "d": "y", "e": "z"}
	want, err := Render(tpl, herald.ChannelPush, "en", shippedData())
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	for i := 0; i < 20; i++ {
		got, err := Render(tpl, herald.ChannelPush, "en", shippedData())
		if err != nil {
			t.Fatal(err)
		}
		gotJSON, _ := json.Marshal(got)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("run %d: %s, want %s", i, gotJSON, wantJSON)
		}
	}
	// Errors are deterministic too: the first failing data key in key order.
	tpl.Push.Data = map[string]string{"a": "{{.x1}}", "b": "{{.x2}}", "c": "{{.x3}}"}
	for i := 0; i < 10; i++ {
		_, err := Render(tpl, herald.ChannelPush, "en", shippedData())
		var re *RenderError
		if !errors.As(err, &re) || re.Field != "data.a" {
			t.Fatalf("err = %v, want a RenderError on data.a", err)
		}
	}
}

func TestRenderEmailHTMLRangeBudgetAndLists(t *testing.T) {
	tpl := Template{Category: "c", Email: &EmailContent{Subject: "s", HTML: `<ul>{{range .items}}<li>{{.}}</li>{{end}}</ul>`}}
	r, err := Render(tpl, herald.ChannelEmail, "en", map[string]any{"items": []any{"a<b", 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Email.HTML, "<ul><li>a&lt;b</li><li>2</li></ul>"; got != want {
		t.Errorf("html = %q, want %q", got, want)
	}
	many := make([]any, MaxRangeIterations+1)
	if _, err := Render(tpl, herald.ChannelEmail, "en", map[string]any{"items": many}); !errors.Is(err, ErrRenderBudget) {
		t.Errorf("err = %v, want ErrRenderBudget", err)
	}
}
