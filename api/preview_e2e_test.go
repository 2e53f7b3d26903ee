package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/templates"
)

func TestTemplatePreviewReportsSMSSegmentsAndPushSize(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("preview")
	h.Template(key, templates.Template{ID: "otp", Category: "security", Critical: true,
		SMS:   &templates.SMSContent{Text: "Your code is {{.code}}. " + strings.Repeat("x", 150)},
		Push:  &templates.PushContent{Title: "Code", Body: "{{.code}}"},
		Email: &templates.EmailContent{Subject: "Code {{.code}}", HTML: "<p>{{.code}}</p>"},
		Locales: map[string]templates.Variant{
			"ru": {SMS: &templates.SMSContent{Text: "Ваш код {{.code}}"}},
		}})

	r := h.MustDo(http.StatusOK, http.MethodPost, "/v1/templates/otp/preview", key, map[string]any{"data": map[string]any{"code": "<123>"}})
	chans := r.JSON["channels"].(map[string]any)
	sms := chans["sms"].(map[string]any)["sms"].(map[string]any)
	if sms["encoding"] != "GSM-7" || sms["segments"].(float64) != 2 {
		t.Fatalf("a 170-character GSM-7 SMS is 2 segments: %v", sms)
	}
	push := chans["push"].(map[string]any)["push"].(map[string]any)
	if push["payload_bytes"].(float64) <= 0 {
		t.Fatalf("push payload size missing: %v", push)
	}
	if html := chans["email"].(map[string]any)["email"].(map[string]any)["html"].(string); !strings.Contains(html, "&lt;123&gt;") {
		t.Fatalf("data must be escaped in the email HTML: %q", html)
	}

	ru := h.Do(http.MethodPost, "/v1/templates/otp/preview", key, map[string]any{"data": map[string]any{"code": "1"}, "locale": "ru-RU"})
	ruSMS := ru.JSON["channels"].(map[string]any)["sms"].(map[string]any)["sms"].(map[string]any)
	if ru.Str("locale") != "ru" || ruSMS["encoding"] != "UCS-2" || ruSMS["segments"].(float64) != 1 {
		t.Fatalf("Cyrillic SMS is UCS-2: %s", ru.Body)
	}
	h.MustDo(http.StatusUnprocessableEntity, http.MethodPost, "/v1/templates/otp/preview", key, map[string]any{"data": map[string]any{}})
	h.MustDo(http.StatusNotFound, http.MethodPost, "/v1/templates/nope/preview", key, map[string]any{})
}
