package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
)

// syncBuffer is a bytes.Buffer safe for the handler's and the test's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// accessLines returns the decoded "http request" lines of a JSON log.
func accessLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "http request" {
			out = append(out, m)
		}
	}
	return out
}

// TestAccessLog: every request gets one line with its method, route pattern,
// status, duration, size and request id, and no credentials or body.
func TestAccessLog(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	srv := httptest.NewServer(api.New(nil, nil, api.Config{}, logger).Handler())
	defer srv.Close()

	send := func(method, path, body string, header ...string) int {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const secret, bodySecret = "c2VjcmV0LWtleS0xMjM0", "body-secret-5678"
	if got := send(http.MethodGet, "/healthz", "", api.RequestIDHeader, "req-42", "Authorization", "Bearer "+secret); got != http.StatusOK {
		t.Fatalf("healthz: %d", got)
	}
	if got := send(http.MethodPost, "/v1/notifications?token="+secret, `{"data":"`+bodySecret+`"}`, "Authorization", "Basic "+secret); got != http.StatusUnauthorized {
		t.Fatalf("POST without a bearer key: %d", got)
	}
	if got := send(http.MethodGet, "/v1/nothing-here/"+secret, ""); got != http.StatusNotFound {
		t.Fatalf("unknown route: %d", got)
	}

	log := buf.String()
	lines := accessLines(t, log)
	if len(lines) != 3 {
		t.Fatalf("want 3 access-log lines, got %d:\n%s", len(lines), log)
	}
	want := []struct {
		method, route string
		status        float64
		requestID     any
	}{
		{"GET", "/healthz", 200, "req-42"},
		{"POST", "/v1/notifications", 401, nil},
		{"GET", "unmatched", 404, nil},
	}
	for i, w := range want {
		l := lines[i]
		if l["method"] != w.method || l["route"] != w.route || l["status"] != w.status || l["request_id"] != w.requestID {
			t.Errorf("line %d: %v, want method %s route %s status %v request_id %v", i, l, w.method, w.route, w.status, w.requestID)
		}
		if l["level"] != "INFO" {
			t.Errorf("line %d: level %v", i, l["level"])
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("line %d: duration_ms %v", i, l["duration_ms"])
		}
		if b, ok := l["bytes"].(float64); !ok || b <= 0 {
			t.Errorf("line %d: bytes %v, want the response size", i, l["bytes"])
		}
	}
	for _, leak := range []string{secret, bodySecret, "Authorization", "Bearer", "Basic"} {
		if strings.Contains(log, leak) {
			t.Errorf("the log contains %q:\n%s", leak, log)
		}
	}
}

// TestAccessLogEndToEnd: through the real wiring, an accepted notification logs its
// route pattern, 202, the tenant and the request id, and neither the API key nor
// the id in the path.
func TestAccessLogEndToEnd(t *testing.T) {
	var buf syncBuffer
	h := apitest.Start(t, apitest.Options{NoWorker: true, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	tenantID, key := h.Tenant("accesslog")
	h.Template(key, apitest.SimpleTemplate("hello"))
	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com"})
	r := h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "hello",
		"channels": []string{"in_app"}, "data": map[string]any{"body": "secret body text"}}, api.RequestIDHeader, "req-e2e-1")
	if r.Status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	id := r.Str("notification_id")
	if g := h.Do(http.MethodGet, "/v1/notifications/"+id, key, nil); g.Status != http.StatusOK {
		t.Fatalf("get: %d %s", g.Status, g.Body)
	}
	log := buf.String()
	var post, get map[string]any
	for _, l := range accessLines(t, log) {
		switch l["route"] {
		case "/v1/notifications":
			post = l
		case "/v1/notifications/:notification_id":
			get = l
		}
	}
	if post == nil || post["method"] != "POST" || post["status"] != float64(202) || post["tenant_id"] != tenantID || post["request_id"] != "req-e2e-1" {
		t.Errorf("POST line: %v", post)
	}
	if get == nil || get["method"] != "GET" || get["status"] != float64(200) || get["tenant_id"] != tenantID || get["request_id"] != nil {
		t.Errorf("GET line: %v", get)
	}
	for _, leak := range []string{key, id, "secret body text"} {
		if strings.Contains(log, leak) {
			t.Errorf("the log contains %q", leak)
		}
	}
}
