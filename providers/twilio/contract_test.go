package twilio_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

// prism is one Prism for the package, validating against the provider's own
// OpenAPI document.
var prism = &providertest.SharedPrism{Spec: providertest.SpecTwilioAPI}

func mock(t *testing.T) *providertest.Prism { return prism.Get(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	prism.Close()
	os.Exit(code)
}

// TestContractCreateMessageConformsToSpec sends the exact requests Herald sends
// through the real twilio-go to a Prism mock of twilio_api_v2010.json.
func TestContractCreateMessageConformsToSpec(t *testing.T) {
	p := mock(t)
	cases := map[string]struct {
		mod func(*twilio.Config)
		msg providers.SMSMessage
	}{
		"from number with status callback": {nil, providers.SMSMessage{To: "+14155552671", Body: "Order #1234 shipped"}},
		"messaging service, unicode body": {func(c *twilio.Config) { c.MessagingServiceSID = "MG0123456789abcdef0123456789abcdef" },
			providers.SMSMessage{To: "+447700900123", Body: "Ihr Paket ist unterwegs 📦"}},
		"explicit callback, idempotency header": {func(c *twilio.Config) { c.IdempotencyHeader = true },
			providers.SMSMessage{To: "+14155552671", From: "+15005550006", Body: "x", StatusCallback: "https://cb.example.com/twilio?a=b"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			capture := &providertest.Capture{}
			cl := newClient(t, p.URL, func(cfg *twilio.Config) {
				cfg.HTTPClient = capture.Client()
				if c.mod != nil {
					c.mod(cfg)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cl.SendSMS(ctx, c.msg, tags.IdempotencyKey(), tags)
			if cerr := capture.CheckConforms(); cerr != nil {
				t.Fatalf("%v\nprism log:\n%s", cerr, p.Log())
			}
			if err != nil || !strings.HasPrefix(res.ProviderMessageID, "SM") {
				t.Fatalf("conforming request, but SendSMS gave %+v, %v", res, err)
			}
		})
	}
}

// TestContractMockRejectsViolations proves the contract test can fail.
func TestContractMockRejectsViolations(t *testing.T) {
	p := mock(t)
	for name, c := range map[string]struct{ path, body string }{
		"no To":           {"/2010-04-01/Accounts/" + accountSID + "/Messages.json", url.Values{"Body": {"x"}, "From": {from}}.Encode()},
		"bad account":     {"/2010-04-01/Accounts/XX123/Messages.json", url.Values{"To": {"+14155552671"}, "Body": {"x"}}.Encode()},
		"Attempt not int": {"/2010-04-01/Accounts/" + accountSID + "/Messages.json", url.Values{"To": {"+14155552671"}, "Body": {"x"}, "Attempt": {"x"}}.Encode()},
	} {
		capture := &providertest.Capture{}
		req, _ := http.NewRequest(http.MethodPost, p.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(accountSID, authToken)
		resp, err := capture.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if capture.CheckConforms() == nil {
			t.Errorf("%s: Prism accepted a request the spec forbids (%d)", name, resp.StatusCode)
		}
	}
}
