package providertest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-notify/herald/providers/providertest"
)

const mailBody = `{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"b@example.com"},"subject":"s","content":[{"type":"text/plain","value":"x"}]}`

func do(t *testing.T, method, url, body string, auth bool) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bearer k")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestContractServerAnswers(t *testing.T) {
	s := providertest.NewContractServer(t, providertest.SpecSendGridMail)

	resp, body := do(t, http.MethodPost, s.URL+"/v3/mail/send", mailBody, true)
	if resp.StatusCode != 202 || resp.Header.Get("X-Message-Id") == "" || resp.Header.Get(providertest.ViolationsHeader) != "" || body != "" {
		t.Fatalf("conforming send: %d %v %q", resp.StatusCode, resp.Header, body)
	}

	for name, c := range map[string]struct {
		method, path, body string
		auth               bool
		status             int
		want               string
	}{
		"unknown path":   {http.MethodPost, "/v3/mail/sendx", mailBody, true, 404, "no path in sendgrid_mail_v3.json matches /v3/mail/sendx"},
		"wrong method":   {http.MethodGet, "/v3/mail/send", "", true, 405, "defines no GET for /v3/mail/send"},
		"no credentials": {http.MethodPost, "/v3/mail/send", mailBody, false, 401, "no Bearer token"},
		"bad body":       {http.MethodPost, "/v3/mail/send", `{"from":{"email":"b@example.com"}}`, true, 400, `property "personalizations" is missing`},
	} {
		resp, body := do(t, c.method, s.URL+c.path, c.body, c.auth)
		v := resp.Header.Get(providertest.ViolationsHeader)
		if resp.StatusCode != c.status || !strings.Contains(v, c.want) || !strings.Contains(body, `"errors":[{`) {
			t.Errorf("%s: %d, %s: %q, body %s; want %d and %q", name, resp.StatusCode, providertest.ViolationsHeader, v, body, c.status, c.want)
		}
	}
	// The spec decides, also where it is loose: sendgrid_mail_v3.json does not mark
	// the request body required, so an empty one conforms (Prism agreed).
	if resp, _ := do(t, http.MethodPost, s.URL+"/v3/mail/send", "", true); resp.StatusCode != 202 {
		t.Errorf("empty body: %d", resp.StatusCode)
	}
	if s.Checked() != 6 || s.Rejected() != 4 {
		t.Fatalf("checked %d rejected %d\n%s", s.Checked(), s.Rejected(), s.Log())
	}
	if log := s.Log(); !strings.Contains(log, "POST /v3/mail/send → 202") || !strings.Contains(log, "  - security: BearerAuth: no Bearer token") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestCaptureCheckConforms(t *testing.T) {
	s := providertest.NewContractServer(t, providertest.SpecSendGridMail)
	c := &providertest.Capture{}
	if err := c.CheckConforms(); err == nil || !strings.Contains(err.Error(), "no request") {
		t.Fatalf("no exchanges: %v", err)
	}
	send := func(body string) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v3/mail/send", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k")
		resp, err := c.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send(mailBody)
	if err := c.CheckConforms(); err != nil {
		t.Fatalf("conforming: %v", err)
	}
	send(`{"personalizations":[]}`)
	err := c.CheckConforms()
	if err == nil || !strings.Contains(err.Error(), "→ 400") || !strings.Contains(err.Error(), `property "from" is missing`) {
		t.Fatalf("violating: %v", err)
	}
}
