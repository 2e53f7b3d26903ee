package api_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/egress"
	"github.com/herald-notify/herald/providers"
	"github.com/herald-notify/herald/providers/providertest"
	"github.com/herald-notify/herald/providers/resolver"
	"github.com/herald-notify/herald/providers/smtp/smtptest"
)

// The probes of the SSRF hardening, end to end: a tenant's provider config
// must not make the worker reach inside the network, and what comes back must
// not carry another host's content.

// egKey is a Google service account key whose token_uri is tokenURI.
func egKey(t *testing.T, tokenURI string) map[string]any {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return map[string]any{"type": "service_account", "project_id": "herald-test", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "herald@herald-test.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURI}
}

// egChannel waits until the notification's channel is in one of statuses and
// returns its status object.
func egChannel(t *testing.T, h *apitest.Harness, key, id, channel string, statuses ...string) map[string]any {
	t.Helper()
	var last map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		chans, _ := r.JSON["channels"].([]any)
		for _, c := range chans {
			m := c.(map[string]any)
			if m["channel"] != channel {
				continue
			}
			last = m
			for _, s := range statuses {
				if m["status"] == s {
					return m
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never became %v: %v", channel, statuses, last)
	return nil
}

// egErrors is every error text the status API shows for a channel.
func egErrors(ch map[string]any) []string {
	var out []string
	if s, ok := ch["last_error"].(string); ok {
		out = append(out, s)
	}
	hist, _ := ch["history"].([]any)
	for _, a := range hist {
		if s, ok := a.(map[string]any)["error"].(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func egNotify(t *testing.T, h *apitest.Harness, key string, channels ...string) string {
	t.Helper()
	r := h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "welcome", "channels": channels})
	if r.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	return r.Str("notification_id")
}

func egTenant(t *testing.T, h *apitest.Harness, name string) (string, string) {
	t.Helper()
	id, key := h.Tenant(name)
	h.Template(key, apitest.SimpleTemplate("welcome"))
	if r := h.Do(http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"}); r.Status != http.StatusCreated {
		t.Fatalf("user: %d %s", r.Status, r.Body)
	}
	return id, key
}

func TestFCMTokenURIMustBeGooglesAtPUT(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("fcm-token-uri")
	for _, uri := range []string{"http://127.0.0.1:9/token", "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token",
		"https://attacker.example/token"} {
		r := h.Do(http.MethodPut, "/v1/providers/push", key, map[string]any{"provider": "fcm",
			"settings": map[string]any{"project_id": "herald-test"}, "credentials": egKey(t, uri)})
		if field, code := r.ErrorField(); r.Status != http.StatusBadRequest || field != "credentials.token_uri" || code != "invalid_field" {
			t.Errorf("token_uri %s: %d %s", uri, r.Status, r.Body)
		}
	}
	r := h.Do(http.MethodPut, "/v1/providers/push", key, map[string]any{"provider": "fcm",
		"settings": map[string]any{"project_id": "herald-test"}, "credentials": egKey(t, "https://oauth2.googleapis.com/token")})
	if r.Status != http.StatusCreated {
		t.Fatalf("Google's token_uri: %d %s", r.Status, r.Body)
	}
}

// TestAStoredFCMTokenURIIsNotUsed: a config stored before the validation
// existed still sends its assertion to the configured token endpoint only (the
// fakes' 127.0.0.1 is allowed here, so only the pinning protects).
func TestAStoredFCMTokenURIIsNotUsed(t *testing.T) {
	evil := providertest.NewTrap(t, http.StatusBadRequest, "INTERNAL-METADATA-SECRET")
	fake := providertest.NewFCM()
	defer fake.Close()
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{FCMBaseURL: fake.URL, FCMTokenURL: fake.TokenURL()}})
	tenantID, key := egTenant(t, h, "fcm-stored")
	secret, _ := json.Marshal(egKey(t, evil.URL+"/latest/meta-data/"))
	ctx := context.Background()
	if err := h.Providers.PutProviderConfig(ctx, providers.ProviderConfig{TenantID: tenantID, Channel: "push", Provider: "fcm", Enabled: true,
		Settings: json.RawMessage(`{"project_id":"herald-test"}`), Secret: secret}); err != nil {
		t.Fatal(err)
	}
	if r := h.Do(http.MethodPut, "/v1/users/ada/push-tokens", key, map[string]any{"token": "device-1", "platform": "android"}); r.Status >= 300 {
		t.Fatalf("push token: %d %s", r.Status, r.Body)
	}
	ch := egChannel(t, h, key, egNotify(t, h, key, "push"), "push", "sent", "failed")
	if ch["status"] != "sent" || evil.Hits() != 0 || fake.TokenRequests() != 1 {
		t.Fatalf("push %v; the key's token_uri was called %d times, the configured endpoint %d (want sent, 0, 1)",
			ch["status"], evil.Hits(), fake.TokenRequests())
	}
}

// TestSMTPToInternalAddressesIsRefused runs the worker under the production
// policy (nothing allowed): a tenant's SMTP relay on loopback or the private
// network is refused at dial time, the channel fails at once, and the history
// names no banner, address or port state.
func TestSMTPToInternalAddressesIsRefused(t *testing.T) {
	port, accepted := smtptest.BannerService(t, "220 (vsFTPd 3.0.3) internal-ftp-7\r\n", "500 Unknown command (vsFTPd 3.0.3 on internal-ftp-7)\r\n")
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{Egress: egress.Default()}})
	for _, relay := range []struct {
		host string
		port int
	}{{"127.0.0.1", port}, {"10.0.0.1", 25}, {"169.254.169.254", 80}} {
		_, key := egTenant(t, h, "smtp-"+relay.host)
		r := h.Do(http.MethodPut, "/v1/providers/email", key, map[string]any{"provider": "smtp",
			"settings": map[string]any{"host": relay.host, "port": relay.port, "from": "shop@example.com", "tls": "none"}, "credentials": map[string]any{}})
		if r.Status != http.StatusCreated {
			t.Fatalf("PUT smtp %s: %d %s", relay.host, r.Status, r.Body)
		}
		ch := egChannel(t, h, key, egNotify(t, h, key, "email"), "email", "failed", "sent")
		errs := egErrors(ch)
		if ch["status"] != "failed" || len(errs) == 0 {
			t.Fatalf("%s: %v", relay.host, ch)
		}
		t.Logf("%s:%d → %s", relay.host, relay.port, errs[0])
		for _, e := range errs {
			if !strings.Contains(e, "egress_refused") || strings.Contains(e, "ftp") || strings.Contains(e, fmt.Sprintf(":%d", relay.port)) {
				t.Errorf("%s: error shown to the tenant: %s", relay.host, e)
			}
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the internal service accepted %d connections", n)
	}
}

// TestLongProviderErrorsAreCutInTheHistory: a provider's 100 KB error body is
// stored cut and printable, in the history and in last_error.
func TestLongProviderErrorsAreCutInTheHistory(t *testing.T) {
	sg := providertest.NewSendGrid()
	defer sg.Close()
	sg.Next(providertest.Behavior{Status: http.StatusBadRequest,
		Body: `{"errors":[{"message":"` + strings.Repeat("A", 100_000) + `\u001b[31m\u0000","field":null}]}`})
	h := apitest.Start(t, apitest.Options{Process: resolver.Process{SendGridBaseURL: sg.URL}})
	_, key := egTenant(t, h, "long-errors")
	if r := h.Do(http.MethodPut, "/v1/providers/email", key, map[string]any{"provider": "sendgrid",
		"settings": map[string]any{"from": "shop@example.com"}, "credentials": map[string]any{"api_key": "SG.test-key"}}); r.Status != http.StatusCreated {
		t.Fatalf("PUT sendgrid: %d %s", r.Status, r.Body)
	}
	ch := egChannel(t, h, key, egNotify(t, h, key, "email"), "email", "failed", "sent")
	errs := egErrors(ch)
	if ch["status"] != "failed" || len(errs) < 2 {
		t.Fatalf("%v", ch)
	}
	t.Logf("stored: %d bytes, ends %q", len(errs[0]), errs[0][len(errs[0])-40:])
	for _, e := range errs {
		if len(e) > providers.MaxErrorTextBytes || !strings.Contains(e, "AAAA…") || strings.ContainsAny(e, "\x1b\x00") {
			t.Errorf("stored error of %d bytes: %.120q", len(e), e)
		}
	}
}
