package twilio_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

// mock is a server validating against the provider's own OpenAPI document
// (providers/testdata/twilio_api_v2010.json, ~1.9 MB, loaded once per process).
func mock(t *testing.T) *providertest.ContractServer {
	return providertest.NewContractServer(t, providertest.SpecTwilioAPI)
}

// TestContractCreateMessageConformsToSpec sends the exact requests Herald sends
// through the real twilio-go to a contract server for twilio_api_v2010.json.
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
				t.Fatalf("%v\ncontract server log:\n%s", cerr, p.Log())
			}
			if err != nil || !strings.HasPrefix(res.ProviderMessageID, "SM") {
				t.Fatalf("conforming request, but SendSMS gave %+v, %v", res, err)
			}
		})
	}
}

// TestContractMockRejectsViolations proves the contract test can fail: each request
// must be rejected, and for the reason the case names.
func TestContractMockRejectsViolations(t *testing.T) {
	p := mock(t)
	messages := "/2010-04-01/Accounts/" + accountSID + "/Messages.json"
	cases := map[string]struct {
		path, body string
		auth       bool
		want       string // in the violations
	}{
		"no To":       {messages, url.Values{"Body": {"x"}, "From": {from}}.Encode(), true, `property "To" is missing`},
		"bad account": {"/2010-04-01/Accounts/XX123/Messages.json", url.Values{"To": {"+14155552671"}, "Body": {"x"}}.Encode(), true, `path parameter "AccountSid"`},
		"Attempt not int": {messages, url.Values{"To": {"+14155552671"}, "Body": {"x"}, "Attempt": {"x"}}.Encode(), true,
			"Attempt: value x: an invalid integer"},
		// format: uri is asserted as Prism asserted it (kin-openapi alone does not).
		"StatusCallback not a URI": {messages, url.Values{"To": {"+14155552671"}, "Body": {"x"}, "StatusCallback": {"cb.example.com/twilio"}}.Encode(), true,
			`at /StatusCallback: string doesn't match the format "uri"`},
		"no basic auth": {messages, url.Values{"To": {"+14155552671"}, "Body": {"x"}}.Encode(), false, "security: accountSid_authToken: no HTTP Basic credentials"},
	}
	for name, c := range cases {
		capture := &providertest.Capture{}
		req, _ := http.NewRequest(http.MethodPost, p.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if c.auth {
			req.SetBasicAuth(accountSID, authToken)
		}
		resp, err := capture.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := capture.CheckConforms(); err == nil {
			t.Errorf("%s: the contract server accepted a request the spec forbids (%d)", name, resp.StatusCode)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: rejected, but the violations do not say %q:\n%v", name, c.want, err)
		}
	}
	if p.Checked() != len(cases) || p.Rejected() != len(cases) {
		t.Errorf("contract server checked %d requests and rejected %d, want %d of each\n%s", p.Checked(), p.Rejected(), len(cases), p.Log())
	}
}
