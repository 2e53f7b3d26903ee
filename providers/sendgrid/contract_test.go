package sendgrid_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
)

// mock is a server validating against the provider's own OpenAPI document
// (providers/testdata/sendgrid_mail_v3.json, loaded once per process).
func mock(t *testing.T) *providertest.ContractServer {
	return providertest.NewContractServer(t, providertest.SpecSendGridMail)
}

// TestContractMailSendConformsToSpec sends the exact requests Herald sends through
// the real SDK to a contract server for sendgrid_mail_v3.json; a request the spec
// rejects fails the test.
func TestContractMailSendConformsToSpec(t *testing.T) {
	p := mock(t)
	cases := map[string]providers.EmailMessage{
		"html and text": message(),
		"text only":     {To: "bob@example.com", Subject: "Hi", Text: "plain"},
		"html, reply-to, headers, categories": {To: "carol@example.com", ToName: "Carol", From: "ops@acme.example", FromName: "Ops",
			ReplyTo: "support@acme.example", Subject: "Digest", HTML: "<b>digest</b>",
			Headers: map[string]string{"List-Unsubscribe": "<mailto:unsub@acme.example>"}, Categories: []string{"digest", "daily", "digest"}},
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			capture := &providertest.Capture{}
			c := newClient(t, p.URL, capture.Client())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := c.SendEmail(ctx, msg, tags.IdempotencyKey(), tags)
			if cerr := capture.CheckConforms(); cerr != nil {
				t.Fatalf("%v\ncontract server log:\n%s", cerr, p.Log())
			}
			if err != nil {
				t.Fatalf("conforming request, but SendEmail failed: %v", err)
			}
			if res.Provider != "sendgrid" || res.ProviderMessageID == "" {
				t.Fatalf("result %+v (want the 202's X-Message-Id as ProviderMessageID)", res)
			}
		})
	}
}

// TestContractMockRejectsViolations proves the contract test can fail: bodies the
// spec forbids must come back as violations — including the SDK's natural shape of
// message-level custom_args (an object, where the spec says string) — and for the
// reason the case names, not some other one.
func TestContractMockRejectsViolations(t *testing.T) {
	p := mock(t)
	const content = `"content":[{"type":"text/plain","value":"x"}]`
	cases := map[string]struct {
		body string
		auth bool
		want string // in the violations
	}{
		"no personalizations": {`{"from":{"email":"a@b.example"},"subject":"x",` + content + `}`, true,
			`property "personalizations" is missing`},
		"message-level custom_args object": {`{"personalizations":[{"to":[{"email":"c@d.example"}]}],"from":{"email":"a@b.example"},"subject":"x",` +
			content + `,"custom_args":{"notification_id":"n"}}`, true, "at /custom_args: value must be a string"},
		// format: email is asserted as Prism asserted it (kin-openapi alone does not).
		"from not an email address": {`{"personalizations":[{"to":[{"email":"c@d.example"}]}],"from":{"email":"ops"},"subject":"x",` +
			content + `}`, true, `at /from/email: string doesn't match the format "email"`},
		"no bearer token": {`{"personalizations":[{"to":[{"email":"c@d.example"}]}],"from":{"email":"a@b.example"},"subject":"x",` +
			content + `}`, false, "security: BearerAuth: no Bearer token"},
	}
	for name, c := range cases {
		capture := &providertest.Capture{}
		req, _ := newRawRequest(p.URL+"/v3/mail/send", c.body)
		if !c.auth {
			req.Header.Del("Authorization")
		}
		resp, err := capture.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := capture.CheckConforms(); err == nil {
			t.Errorf("%s: the contract server accepted a request the spec forbids (status %d)", name, resp.StatusCode)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: rejected, but the violations do not say %q:\n%v", name, c.want, err)
		}
	}
	if p.Checked() != len(cases) || p.Rejected() != len(cases) {
		t.Errorf("contract server checked %d requests and rejected %d, want %d of each\n%s", p.Checked(), p.Rejected(), len(cases), p.Log())
	}
}

func newRawRequest(url, body string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer SG.test-key")
	return req, nil
}

// TestContractBatchConformsToSpec: a batch mail send with the most
// personalizations the spec allows (1,000, each with its own to, headers and
// custom_args) conforms to sendgrid_mail_v3.json; one more is refused before a
// request is made.
func TestContractBatchConformsToSpec(t *testing.T) {
	p := mock(t)
	capture := &providertest.Capture{}
	c := newClient(t, p.URL, capture.Client())
	to := make([]providers.BatchRecipient, sendgrid.MaxPersonalizations)
	for i := range to {
		tg := tags
		tg.NotificationID = fmt.Sprintf("n_%04d", i)
		to[i] = providers.BatchRecipient{To: fmt.Sprintf("user%d@example.com", i), Tags: tg,
			Headers: map[string]string{"List-Unsubscribe": fmt.Sprintf("<https://herald.example/u/%d>", i)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.SendEmailBatch(ctx, message(), to)
	if cerr := capture.CheckConforms(); cerr != nil {
		t.Fatalf("%v\ncontract server log:\n%s", cerr, p.Log())
	}
	if err != nil || res.ProviderMessageID == "" {
		t.Fatalf("batch: %+v %v", res, err)
	}
	if _, err := c.SendEmailBatch(ctx, message(), append(to, to[0])); err == nil {
		t.Fatal("a batch over 1,000 personalizations was sent")
	}
}
