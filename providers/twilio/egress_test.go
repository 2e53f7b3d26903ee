package twilio_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/twilio"
)

func TestRedirectsAreNotFollowedAndInternalHostsRefused(t *testing.T) {
	var reached atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"code":21211,"message":"CONTENT-OF-ANOTHER-HOST","status":400}`)
	}))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	policy := egress.MustParse(strings.TrimPrefix(api.URL, "http://"))
	_, err := send(t, newClient(t, api.URL, func(c *twilio.Config) { c.HTTPClient = policy.Client(5 * time.Second) }))
	if err == nil || strings.Contains(err.Error(), "ANOTHER-HOST") || reached.Load() != 0 {
		t.Fatalf("redirect: %v (other host reached %d times)", err, reached.Load())
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
