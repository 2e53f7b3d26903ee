package contract

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

// The delivery activities' inputs are carried through Temporal and the provider
// payloads stored in dead letters: their JSON is pinned here.
func TestDeliveryPayloadShapes(t *testing.T) {
	to := Addressee{TenantID: "t", NotificationID: "n", UserID: "u", Email: "u@example.com", Phone: "+15550100", Category: "c",
		AcceptedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	r := RenderResult{Rendered: templates.Rendered{
		InApp: &templates.RenderedInApp{Title: "it", Body: "ib", ActionURL: "https://x"},
		Email: &templates.RenderedEmail{Subject: "s", HTML: "h", Text: "x"},
		SMS:   &templates.RenderedSMS{Text: "sms"},
		Push:  &templates.RenderedPush{Title: "pt", Body: "pb", Data: map[string]string{"k": "v"}},
	}, Headers: map[string]string{"H": "v"}}
	for ch, want := range map[herald.Channel]string{
		herald.ChannelInApp: `{"TenantID":"t","UserID":"u","NotificationID":"n","Title":"it","Body":"ib","ActionURL":"https://x","Category":"c","AcceptedAt":"2025-01-02T03:04:05Z"}`,
		herald.ChannelEmail: `{"Email":{"TenantID":"t","NotificationID":"n","To":"u@example.com","Subject":"s","HTML":"h","Text":"x","Headers":{"H":"v"},"Category":"c"}}`,
		herald.ChannelSMS:   `{"SMS":{"TenantID":"t","NotificationID":"n","To":"+15550100","Body":"sms"}}`,
		herald.ChannelPush:  `{"Push":{"TenantID":"t","NotificationID":"n","UserID":"u","Title":"pt","Body":"pb","Data":{"k":"v"}}}`,
	} {
		d, err := DeliveryPayload(to, ch, r)
		if err != nil {
			t.Fatalf("%s: %v", ch, err)
		}
		var v any = d.Provider // the dead letter's payload
		if d.InApp != nil {
			v = d.InApp
		}
		if got, _ := json.Marshal(v); string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", ch, got, want)
		}
	}
}

func TestDeliveryPayloadRefusals(t *testing.T) {
	r := RenderResult{Rendered: templates.Rendered{Email: &templates.RenderedEmail{Subject: "s"}, SMS: &templates.RenderedSMS{Text: "x"}}}
	for _, tc := range []struct {
		channel herald.Channel
		to      Addressee
		want    error
	}{
		{herald.ChannelEmail, Addressee{Phone: "+1"}, ErrNoAddress},
		{herald.ChannelSMS, Addressee{Email: "a@b"}, ErrNoAddress},
		{herald.ChannelPush, Addressee{Email: "a@b"}, ErrNoContent},
		{herald.ChannelInApp, Addressee{}, ErrNoContent},
		{"pigeon", Addressee{}, ErrNoContent},
	} {
		if _, err := DeliveryPayload(tc.to, tc.channel, r); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.channel, err, tc.want)
		}
	}
}
