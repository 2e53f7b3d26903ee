package fcm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/fcm"
	"github.com/herald-notify/herald/providers/providertest"
)

// withTokenURI is a service account key whose token_uri is uri (absent when "").
func withTokenURI(t *testing.T, uri string, extra map[string]string) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(providertest.ServiceAccountJSON(t, uri), &m); err != nil {
		t.Fatal(err)
	}
	if uri == "" {
		delete(m, "token_uri")
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

func TestValidationRefusesATokenURIThatIsNotGoogles(t *testing.T) {
	def := fcm.Definition()
	settings := json.RawMessage(`{"project_id":"herald-test"}`)
	for _, uri := range []string{
		"http://127.0.0.1:8080/token",
		"http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token",
		"http://[fd00:ec2::254]/latest/api/token",
		"http://metadata.google.internal/computeMetadata/v1/",
		"https://oauth2.googleapis.com.evil.example/token",
		"https://oauth2.googleapis.com/token?x=1",
		"http://oauth2.googleapis.com/token",
		"",
	} {
		creds := withTokenURI(t, "x", map[string]string{"token_uri": uri})
		_, err := def.Validate(context.Background(), settings, creds)
		var fe *providers.FieldError
		if !errors.As(err, &fe) || fe.Field != "credentials.token_uri" {
			t.Errorf("token_uri %q: %v, want a refusal of credentials.token_uri", uri, err)
			continue
		}
		if uri != "" && strings.Contains(fe.Message, uri) {
			t.Errorf("the refusal quotes the URL: %s", fe.Message)
		}
	}
	for _, uri := range []string{fcm.GoogleTokenURL, "https://accounts.google.com/o/oauth2/token"} {
		if _, err := def.Validate(context.Background(), settings, withTokenURI(t, uri, nil)); err != nil {
			t.Errorf("Google's %s refused: %v", uri, err)
		}
	}
	if _, err := def.Validate(context.Background(), settings, withTokenURI(t, "", nil)); err != nil {
		t.Errorf("a key without token_uri refused: %v", err)
	}
	_, err := def.Validate(context.Background(), settings, withTokenURI(t, fcm.GoogleTokenURL, map[string]string{"universe_domain": "evil.example"}))
	var fe *providers.FieldError
	if !errors.As(err, &fe) || fe.Field != "credentials.universe_domain" {
		t.Errorf("universe_domain: %v", err)
	}
}

// hostRecorder records the host of every request that goes out.
type hostRecorder struct {
	base  http.RoundTripper
	mu    sync.Mutex
	hosts []string
}

func (h *hostRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return h.base.RoundTrip(r)
}

func (h *hostRecorder) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.hosts...)
}

// TestAStoredTokenURIIsIgnoredAtSendTime: a key stored before validation
// refused such token_uris (or written to the database directly) still sends
// its assertion only to the token endpoint Herald was configured with. The
// policy here even allows 127.0.0.1, where the attacker's endpoint listens:
// only the pinning keeps the worker away from it.
func TestAStoredTokenURIIsIgnoredAtSendTime(t *testing.T) {
	evil := providertest.NewTrap(t, http.StatusBadRequest, "INTERNAL-METADATA-SECRET")
	google := newFake() // stands in for oauth2.googleapis.com and fcm.googleapis.com
	defer google.Close()

	for _, uri := range []string{evil.URL + "/token", "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token"} {
		rec := &hostRecorder{base: providertest.Loopback().Transport()}
		hc := &http.Client{Transport: rec, Timeout: 5 * time.Second, CheckRedirect: egress.RefuseRedirects}
		c, err := fcm.FromConfig(context.Background(), providers.ProviderConfig{Settings: json.RawMessage(`{"project_id":"herald-test"}`),
			Secret: withTokenURI(t, uri, nil)}, fcm.Process{BaseURL: google.URL, TokenURL: google.TokenURL(), HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := send(t, c); err != nil {
			t.Fatalf("token_uri %s: %v", uri, err)
		}
		for _, h := range rec.seen() {
			if h != strings.TrimPrefix(google.URL, "http://") {
				t.Errorf("token_uri %s: a request went to %s", uri, h)
			}
		}
	}
	if evil.Hits() != 0 || google.TokenRequests() != 2 {
		t.Fatalf("attacker's endpoint called %d times, the configured one %d (want 0, 2)", evil.Hits(), google.TokenRequests())
	}
}

// TestTheTokenExchangeIsUnderThePolicy: the token endpoint is dialled through
// the egress policy and its redirects are not followed.
func TestTheTokenExchangeIsUnderThePolicy(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	key := withTokenURI(t, fcm.GoogleTokenURL, nil)
	build := func(tokenURL string, hc *http.Client) *fcm.Client {
		c, err := fcm.FromConfig(context.Background(), providers.ProviderConfig{Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: key},
			fcm.Process{BaseURL: fake.URL, TokenURL: tokenURL, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The default policy: the fake on 127.0.0.1 is refused, token exchange and all.
	_, err := send(t, build(fake.TokenURL(), nil))
	if err == nil || !strings.Contains(err.Error(), "refused") || fake.Calls() != 0 {
		t.Fatalf("default policy: %v (fake called %d times)", err, fake.Calls())
	}
	// A token endpoint that redirects elsewhere: not followed.
	other := providertest.NewTrap(t, http.StatusOK, `{"access_token":"from-elsewhere","token_type":"Bearer","expires_in":3600}`)
	redirector := providertest.NewRedirector(t, other.URL)
	_, err = send(t, build(redirector+"/token", providertest.LoopbackClient(5*time.Second)))
	if err == nil || other.Hits() != 0 || strings.Contains(err.Error(), "from-elsewhere") {
		t.Fatalf("redirected token endpoint: %v (other host called %d times)", err, other.Hits())
	}
}

func TestLongFCMErrorBodiesAreCut(t *testing.T) {
	fake := newFake()
	defer fake.Close()
	fake.Next(providertest.Behavior{Status: 400, Body: providertest.FCMError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
		strings.Repeat("x", 100_000)+"\x1b[31m\x00")})
	_, err := send(t, newClient(t, fake.URL, 0))
	if err == nil || len(err.Error()) > 600 || strings.ContainsAny(err.Error(), "\x1b\x00") {
		t.Fatalf("error of %d bytes: %.200q", len(err.Error()), err)
	}
}
