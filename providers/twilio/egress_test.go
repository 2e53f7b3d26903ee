package twilio_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

func TestRedirectsAreNotFollowedAndInternalHostsRefused(t *testing.T) {
	other := providertest.NewTrap(t, http.StatusBadRequest, `{"code":21211,"message":"CONTENT-OF-ANOTHER-HOST","status":400}`)
	api := providertest.NewRedirector(t, other.URL)
	policy := egress.MustParse(strings.TrimPrefix(api, "http://"))
	_, err := send(t, newClient(t, api, func(c *twilio.Config) { c.HTTPClient = policy.Client(5 * time.Second) }))
	if err == nil || strings.Contains(err.Error(), "ANOTHER-HOST") || other.Hits() != 0 {
		t.Fatalf("redirect: %v (other host reached %d times)", err, other.Hits())
	}

	fake := providertest.NewTwilio()
	defer fake.Close()
	c, err := twilio.New(twilio.Config{AccountSID: accountSID, AuthToken: authToken, From: from, BaseURL: fake.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, c); !providers.IsPermanent(err) || !strings.Contains(err.Error(), "egress_refused") || fake.Calls() != 0 {
		t.Fatalf("default policy: %v (fake called %d times)", err, fake.Calls())
	}
}
