package twilio

import (
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/twilio/twilio-go/client"

	"github.com/herald-notify/herald/providers/providertest"
)

// sign is Twilio's signature, computed without twilio-go or Herald.
var sign = providertest.TwilioSignature

// ValidateForm accepts exactly what twilio-go's RequestValidator accepts.
func TestValidateFormAgreesWithRequestValidator(t *testing.T) {
	const token = "tw-secret"
	form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}, "To": {"+14155550100"}, "Empty": {""}, "Multi": {"a", "b"}}
	body := []byte(form.Encode())
	urls := []string{
		"https://herald.example.test/v1/webhooks/twilio?tenant=t_1&notification_id=n_1&channel=sms",
		"https://herald.example.test:443/v1/webhooks/twilio?tenant=t_1",
		"http://127.0.0.1:8080/v1/webhooks/twilio?tenant=t_1",
		"http://herald.example.test/v1/webhooks/twilio",
	}
	rv := client.NewRequestValidator(token)
	v := NewWebhookValidator(token)
	for _, u := range urls {
		signed := []string{sign(token, u, form), sign(token, withPort(u), form), sign(token, withoutPort(u), form),
			sign("other", u, form), sign(token, u+"&x=1", form), "", "bm90IGEgc2lnbmF0dXJl"}
		for _, sig := range signed {
			for _, b := range [][]byte{body, []byte("MessageSid=SM2"), []byte("%zz"), nil} {
				want := sig != "" && rv.ValidateBody(u, b, sig)
				got, err := v.ValidateForm(u, b, sig)
				if (err == nil) != want {
					t.Errorf("%s %q %q: ValidateForm err = %v, RequestValidator = %v", u, b, sig, err, want)
				}
				if err == nil && got.Get("MessageSid") == "" {
					t.Errorf("%s: the parsed form lacks MessageSid: %v", u, got)
				}
			}
		}
	}
}

// A forged 64 KiB body of empty parameters costs linear work: twilio-go's
// validator concatenates the signed string one parameter at a time.
func TestValidateFormIsLinear(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 64<<10-10; i++ {
		fmt.Fprintf(&b, "p%d=&", i)
	}
	body := []byte(b.String())
	v := NewWebhookValidator("tw-secret")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := v.ValidateForm("https://herald.example.test/v1/webhooks/twilio?tenant=t_1", body, "bm90IGEgc2lnbmF0dXJl"); err == nil {
		t.Fatal("a forged body verified")
	}
	runtime.ReadMemStats(&after)
	// url.ParseQuery's map and strings: a few MiB at most, nothing per byte
	// of the signed string (the RequestValidator: ~240 MB for this body).
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("validating a 64 KiB forged body allocated %d KiB", got>>10)
	}
}
