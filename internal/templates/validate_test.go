package templates

import (
	"strings"
	"testing"
)

func validTemplate() Template {
	return Template{
		ID: "order_shipped", Version: 1, Category: "shipping",
		Email: &EmailContent{
			Subject: "Order {{.order.id}} shipped",
			HTML:    "<p>Hi {{.name}},</p>\n<p>your order {{.order.id}} is on its way.</p>",
			Text:    "Hi {{.name}}, your order {{.order.id}} is on its way.",
		},
		SMS:   &SMSContent{Text: "Order {{.order.id}} shipped"},
		Push:  &PushContent{Title: "Shipped", Body: "Order {{.order.id}}", Data: map[string]string{"order_id": "{{.order.id}}"}},
		InApp: &InAppContent{Title: "Shipped", Body: "Order {{.order.id}} shipped", ActionURL: "https://shop.example/orders/{{.order.id}}"},
		Locales: map[string]Variant{
			"de": {Email: &EmailContent{Subject: "Bestellung {{.order.id}} versandt"}},
		},
	}
}

func TestValidateAcceptsValidTemplate(t *testing.T) {
	if errs := Validate(validTemplate()); len(errs) != 0 {
		t.Fatalf("Validate(valid) = %v, want none", errs)
	}
}

func TestValidateSyntaxErrorsNameChannelFieldAndLine(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Template)
		want   FieldError // Message is matched as a substring
	}{
		{
			name: "html unclosed action on line 3",
			mutate: func(t *Template) {
				t.Email.HTML = "<p>one</p>\n<p>two</p>\n<p>{{.name</p>\n"
			},
			want: FieldError{Channel: "email", Field: "html", Line: 3, Message: "bad character U+003C '<'"},
		},
		{
			name:   "sms unknown function on line 2",
			mutate: func(t *Template) { t.SMS.Text = "Hello\n{{shout .name}}" },
			want:   FieldError{Channel: "sms", Field: "text", Line: 2, Message: `function "shout" not defined`},
		},
		{
			name:   "subject missing end",
			mutate: func(t *Template) { t.Email.Subject = "{{if .x}}yes" },
			want:   FieldError{Channel: "email", Field: "subject", Line: 1, Message: "unexpected EOF"},
		},
		{
			name:   "push data value",
			mutate: func(t *Template) { t.Push.Data["deep_link"] = "app://x/\n\n{{.a b}}" },
			want:   FieldError{Channel: "push", Field: "data.deep_link", Line: 3},
		},
		{
			name:   "in_app action_url",
			mutate: func(t *Template) { t.InApp.ActionURL = "{{end}}" },
			want:   FieldError{Channel: "in_app", Field: "action_url", Line: 1, Message: "unexpected {{end}}"},
		},
		{
			name: "locale variant",
			mutate: func(t *Template) {
				t.Locales["fr"] = Variant{SMS: &SMSContent{Text: "ok\n{{range}}"}}
			},
			want: FieldError{Channel: "sms", Field: "text", Locale: "fr", Line: 2, Message: "missing value for range"},
		},
		{
			name:   "html context error (branches end in different contexts)",
			mutate: func(t *Template) { t.Email.HTML = "<p>x</p>\n{{if .vip}}<a href=\"{{end}}\">y</a>" },
			want:   FieldError{Channel: "email", Field: "html", Line: 2, Message: "branches end in different contexts"},
		},
		{
			name:   "define is not allowed",
			mutate: func(t *Template) { t.SMS.Text = "a\n{{define \"x\"}}b{{end}}" },
			want:   FieldError{Channel: "sms", Field: "text", Line: 2, Message: "not allowed"},
		},
		{
			name:   "template call is not allowed",
			mutate: func(t *Template) { t.SMS.Text = "a\n\n{{template \"sms.text\"}}" },
			want:   FieldError{Channel: "sms", Field: "text", Line: 3, Message: "{{template}} is not allowed"},
		},
		{
			name:   "block is not allowed",
			mutate: func(t *Template) { t.InApp.Body = "{{block \"b\" .}}x{{end}}" },
			want:   FieldError{Channel: "in_app", Field: "body", Message: "not allowed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl := validTemplate()
			tc.mutate(&tpl)
			errs := Validate(tpl)
			if len(errs) != 1 {
				t.Fatalf("Validate = %v, want exactly one error", errs)
			}
			got := errs[0]
			if got.Channel != tc.want.Channel || got.Field != tc.want.Field || got.Locale != tc.want.Locale {
				t.Errorf("error located at %q/%q/%q, want %q/%q/%q (%v)", got.Channel, got.Field, got.Locale, tc.want.Channel, tc.want.Field, tc.want.Locale, got)
			}
			if tc.want.Line != 0 && got.Line != tc.want.Line {
				t.Errorf("Line = %d, want %d (%v)", got.Line, tc.want.Line, got)
			}
			if !strings.Contains(got.Message, tc.want.Message) {
				t.Errorf("Message = %q, want it to contain %q", got.Message, tc.want.Message)
			}
			if strings.HasPrefix(got.Message, "template:") {
				t.Errorf("Message %q still carries the text/template prefix", got.Message)
			}
		})
	}
}

func TestValidateStructure(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*Template)
		wantField string
		wantMsg   string
	}{
		{"no category", func(t *Template) { t.Category = "" }, "category", "required"},
		{"bad category", func(t *Template) { t.Category = "mark eting" }, "category", "may only contain"},
		{"no channels", func(t *Template) {
			t.Email, t.SMS, t.Push, t.InApp, t.Locales = nil, nil, nil, nil, nil
		}, "template", "at least one channel"},
		{"empty sms", func(t *Template) { t.SMS.Text = "  " }, "text", "sms text is required"},
		{"email without subject", func(t *Template) { t.Email.Subject = "" }, "subject", "subject is required"},
		{"email without body", func(t *Template) { t.Email.HTML, t.Email.Text = "", "" }, "html", "html or a text body"},
		{"push without title and body", func(t *Template) { t.Push.Title, t.Push.Body = "", "" }, "body", "title or a body"},
		{"in_app without body", func(t *Template) { t.InApp.Body = "" }, "body", "in_app body is required"},
		{"reserved push key", func(t *Template) { t.Push.Data["google.sent_time"] = "x" }, "data.google.sent_time", "reserved by FCM"},
		{"reserved push key from", func(t *Template) { t.Push.Data["from"] = "x" }, "data.from", "reserved by FCM"},
		{"bad default locale", func(t *Template) { t.DefaultLocale = "english!" }, "default_locale", "BCP 47"},
		{"bad variant locale", func(t *Template) { t.Locales["xx-!!"] = Variant{} }, "locales", "BCP 47"},
		{"variant duplicates base", func(t *Template) { t.Locales["EN"] = Variant{} }, "locales", "duplicates the base locale"},
		{"variant duplicates variant", func(t *Template) { t.Locales["DE"] = Variant{} }, "locales", "duplicates variant"},
		{"variant for a channel the base lacks", func(t *Template) {
			t.SMS = nil
			t.Locales["de"] = Variant{SMS: &SMSContent{Text: "x"}}
		}, "template", "base template lacks"},
		{"field too large", func(t *Template) { t.Email.HTML = strings.Repeat("a", MaxFieldBytes+1) }, "html", "limit is 16384 bytes"},
		{"template too large", func(t *Template) {
			// Five fields under the per-field cap but over the total cap.
			big := strings.Repeat("b", MaxFieldBytes-10)
			t.Email.HTML, t.Email.Text, t.SMS.Text, t.InApp.Body = big, big, big, big
			t.Locales["de"] = Variant{Email: &EmailContent{HTML: big}}
		}, "template", "limit is 65536 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl := validTemplate()
			tc.mutate(&tpl)
			errs := Validate(tpl)
			for _, e := range errs {
				if e.Field == tc.wantField && strings.Contains(e.Message, tc.wantMsg) {
					return
				}
			}
			t.Fatalf("Validate = %v, want an error on %q containing %q", errs, tc.wantField, tc.wantMsg)
		})
	}
}

func TestValidateIsDeterministic(t *testing.T) {
	tpl := validTemplate()
	tpl.Push.Data = map[string]string{"a": "{{", "b": "{{", "c": "{{", "d": "{{", "from": "x"}
	tpl.Locales = map[string]Variant{"de": {SMS: &SMSContent{Text: "{{"}}, "fr": {SMS: &SMSContent{Text: "{{"}}, "it": {SMS: &SMSContent{Text: "{{"}}}
	first := Validate(tpl)
	if len(first) < 8 {
		t.Fatalf("want at least 8 errors, got %v", first)
	}
	for i := 0; i < 20; i++ {
		again := Validate(tpl)
		if len(again) != len(first) {
			t.Fatalf("run %d: %d errors, want %d", i, len(again), len(first))
		}
		for j := range again {
			if again[j] != first[j] {
				t.Fatalf("run %d: error %d = %v, want %v", i, j, again[j], first[j])
			}
		}
	}
}

func TestFieldErrorString(t *testing.T) {
	e := FieldError{Channel: "email", Field: "html", Locale: "de", Line: 3, Message: "boom"}
	if got, want := e.Error(), "locales.de.email.html:3: boom"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
