package sendgrid_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
)

// prism is one Prism for the package, validating against the provider's own
// OpenAPI document.
var prism = &providertest.SharedPrism{Spec: providertest.SpecSendGridMail}

func mock(t *testing.T) *providertest.Prism { return prism.Get(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	prism.Close()
	os.Exit(code)
}

// TestContractMailSendConformsToSpec sends the exact requests Herald sends through
// the real SDK to a Prism mock of sendgrid_mail_v3.json; a request the spec rejects
// fails the test.
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
				t.Fatalf("%v\nprism log:\n%s", cerr, p.Log())
			}
			if err != nil {
				t.Fatalf("conforming request, but SendEmail failed: %v", err)
			}
			if res.Provider != "sendgrid" {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// TestContractMockRejectsViolations proves the contract test can fail: bodies the
// spec forbids must come back as violations — including the SDK's natural shape of
// message-level custom_args (an object, where the spec says string).
func TestContractMockRejectsViolations(t *testing.T) {
	p := mock(t)
	for name, body := range map[string]string{
		"no personalizations": `{"from":{"email":"a@b.example"},"subject":"x","content":[{"type":"text/plain","value":"x"}]}`,
		"message-level custom_args object": `{"personalizations":[{"to":[{"email":"c@d.example"}]}],"from":{"email":"a@b.example"},"subject":"x",` +
			`"content":[{"type":"text/plain","value":"x"}],"custom_args":{"notification_id":"n"}}`,
	} {
		capture := &providertest.Capture{}
		req, _ := newRawRequest(p.URL+"/v3/mail/send", body)
		resp, err := capture.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if capture.CheckConforms() == nil {
			t.Errorf("%s: Prism accepted a request the spec forbids (status %d)", name, resp.StatusCode)
		}
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
