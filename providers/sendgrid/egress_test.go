package sendgrid_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/sendgrid"
)

// TestARedirectToAnotherHostIsNotFollowed: the API host (allowed by host and
// port) redirects to another host on loopback; the request, with its API key,
// never reaches it, and nothing of its body is reported.
func TestARedirectToAnotherHostIsNotFollowed(t *testing.T) {
	other := providertest.NewTrap(t, http.StatusBadRequest, `{"errors":[{"message":"CONTENT-OF-ANOTHER-HOST"}]}`)
	api := providertest.NewRedirector(t, other.URL)
	policy := egress.MustParse(strings.TrimPrefix(api, "http://"))
	c, err := sendgrid.New(sendgrid.Config{APIKey: "SG.test-key", BaseURL: api, From: "noreply@acme.example", HTTPClient: policy.Client(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = send(t, c)
	pe, ok := providers.AsError(err)
	if !ok || pe.Code != "redirect" || strings.Contains(err.Error(), "ANOTHER-HOST") || strings.Contains(err.Error(), other.URL) {
		t.Fatalf("err = %v", err)
	}
	if other.Hits() != 0 {
		t.Fatalf("the other host was reached %d times", other.Hits())
	}
}

// TestTheDefaultClientRefusesInternalHosts: a sender built without a client
// (or with one that has no transport) is under the default policy.
func TestTheDefaultClientRefusesInternalHosts(t *testing.T) {
	fake := providertest.NewSendGrid()
	defer fake.Close()
	for _, hc := range []*http.Client{nil, {Timeout: time.Second}} {
		c, err := sendgrid.New(sendgrid.Config{APIKey: "SG.test-key", BaseURL: fake.URL, From: "noreply@acme.example", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := send(t, c); !providers.IsPermanent(err) || !strings.Contains(err.Error(), "egress_refused") {
			t.Fatalf("err = %v", err)
		}
	}
	if fake.Calls() != 0 {
		t.Fatalf("the fake on 127.0.0.1 was called %d times", fake.Calls())
	}
}

func TestLongErrorBodiesAreCutAndPrintable(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"errors":[{"message":"`+strings.Repeat("A", 100_000)+`\u0001\u001b[31m\ud800"}]}`)
	}))
	defer api.Close()
	_, err := send(t, newClient(t, api.URL, nil))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if len(msg) > len("sendgrid: permanent [http_400]: ")+providers.MaxReasonBytes || !strings.HasSuffix(msg, "…") || strings.ContainsAny(msg, "\x01\x1b") {
		t.Fatalf("error of %d bytes: %.100q…", len(msg), msg)
	}
}
