package templates

import (
	"reflect"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
)

func TestVariables(t *testing.T) {
	tpl := Template{
		Category: "c",
		Email: &EmailContent{
			Subject: "{{.name}}: order {{.order.id}}",
			HTML: `{{if .vip}}<b>{{.vip_code}}</b>{{else if .regular}}hi{{end}}` +
				`{{range .items}}<li>{{.sku}} {{$.currency}}</li>{{else}}{{.empty_note}}{{end}}` +
				`{{with .address}}{{.city}}{{else}}{{.no_address}}{{end}}` +
				`{{with .}}{{.greeting}}{{end}}` +
				`{{index . "optional"}}{{(.obj).field}}{{.name | upper}}{{printf "%s" .fmt_arg}}`,
		},
		SMS:   &SMSContent{Text: "{{.sms_only}}"},
		InApp: &InAppContent{Body: "{{range $i, $e := .rows}}{{$i}}{{$e.x}}{{end}}"},
		Locales: map[string]Variant{
			"de": {SMS: &SMSContent{Text: "{{.sms_de}} {{.name}}"}},
		},
	}
	tests := []struct {
		locale   string
		channels []herald.Channel
		want     []string
	}{
		{"en", nil, []string{"address", "currency", "empty_note", "fmt_arg", "greeting", "items", "name", "no_address", "obj", "order", "regular", "rows", "sms_only", "vip", "vip_code"}},
		{"en", []herald.Channel{herald.ChannelSMS}, []string{"sms_only"}},
		{"de-AT", []herald.Channel{herald.ChannelSMS}, []string{"name", "sms_de"}},
		{"en", []herald.Channel{herald.ChannelInApp, herald.ChannelSMS}, []string{"rows", "sms_only"}},
		{"en", []herald.Channel{herald.ChannelPush}, nil},
	}
	for _, tc := range tests {
		got := Variables(tpl, tc.locale, tc.channels...)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Variables(%s, %v) = %v, want %v", tc.locale, tc.channels, got, tc.want)
		}
	}
}

func TestMissingVariables(t *testing.T) {
	tpl := validTemplate() // needs name and order.id
	tests := []struct {
		name string
		data map[string]any
		want []string
	}{
		{"all present", shippedData(), nil},
		{"nothing", nil, []string{"name", "order"}},
		{"nested key missing", map[string]any{"name": "A", "order": map[string]any{"number": 1}}, []string{"order.id"}},
		{"parent not an object", map[string]any{"name": "A", "order": "999"}, []string{"order.id"}},
		{"parent null", map[string]any{"name": "A", "order": nil}, []string{"order.id"}},
		{"extra keys are fine", map[string]any{"name": "A", "order": map[string]any{"id": 1}, "x": 1}, nil},
	}
	for _, tc := range tests {
		got := MissingVariables(tpl, "en", tc.data)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: MissingVariables = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Restricted to SMS, only what the SMS text needs counts.
	if got := MissingVariables(tpl, "en", map[string]any{"order": map[string]any{"id": 1}}, herald.ChannelSMS); got != nil {
		t.Errorf("sms-only MissingVariables = %v, want nil", got)
	}
	// Whatever MissingVariables accepts renders without a missing-key error.
	for _, ch := range tpl.Channels() {
		if _, err := Render(tpl, ch, "de", shippedData()); err != nil {
			t.Errorf("render %s: %v", ch, err)
		}
	}
}
