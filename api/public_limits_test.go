package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/herald-notify/herald/providers/sendgrid"
)

func ginTestContext(w *httptest.ResponseRecorder, req *http.Request) (*gin.Context, *gin.Engine) {
	gin.SetMode(gin.ReleaseMode)
	c, e := gin.CreateTestContext(w)
	c.Request = req
	return c, e
}

func TestPublicLimiterBuckets(t *testing.T) {
	p := newPublicLimiter(PublicLimits{PerIP: Rate{PerSecond: 10, Burst: 5}, Keys: 3})
	now := time.Unix(1_700_000_000, 0)
	for i := range 5 {
		if ok, _ := p.take("a", 1, p.limits.PerIP, now); !ok {
			t.Fatalf("take %d refused within the burst", i)
		}
	}
	ok, retry := p.take("a", 1, p.limits.PerIP, now)
	if ok || retry <= 0 || retry > 100*time.Millisecond {
		t.Fatalf("over the burst: ok=%v retry=%v, want a refusal for ~100ms", ok, retry)
	}
	if ok, _ := p.take("a", 1, p.limits.PerIP, now.Add(100*time.Millisecond)); !ok {
		t.Fatal("refused after the refill")
	}
	// A request heavier than the bucket costs the whole bucket, not forever.
	if ok, _ := p.take("big", 50, p.limits.PerIP, now); !ok {
		t.Fatal("a heavy request on a full bucket was refused")
	}
	if ok, _ := p.take("big", 1, p.limits.PerIP, now); ok {
		t.Fatal("the heavy request left tokens")
	}
	// Other keys have their own buckets; at most Keys are kept.
	for _, k := range []string{"b", "c", "d", "e"} {
		if ok, _ := p.take(k, 5, p.limits.PerIP, now); !ok {
			t.Fatalf("key %s refused", k)
		}
	}
	if n := p.keys.Len(); n > 3 {
		t.Fatalf("%d buckets kept, want at most 3", n)
	}
	// Defaults fill what is zero; a negative rate is off.
	d := newPublicLimiter(PublicLimits{PerTenant: Rate{PerSecond: -1}})
	if d.limits.PerIP != defaultPublicLimits.PerIP || d.limits.Keys != defaultPublicLimits.Keys {
		t.Fatalf("defaults not applied: %+v", d.limits)
	}
	for range 10_000 {
		if ok, _ := d.take("t", 1, d.limits.PerTenant, now); !ok {
			t.Fatal("a bucket that is off refused")
		}
	}
}

// The per-tenant bucket refuses a tenant's flood from many addresses, and the
// per-IP bucket charges a body by its size.
func TestLimitPublicMiddleware(t *testing.T) {
	s := &middleware{public: newPublicLimiter(PublicLimits{PerIP: Rate{PerSecond: 1e-6, Burst: 40}, PerTenant: Rate{PerSecond: 1e-6, Burst: 3}})}
	mw := s.limitPublic("webhook", sendgrid.MaxWebhookBodyBytes, true)
	h := func(path, ip string, body int) int {
		w := httptest.NewRecorder()
		c, _ := ginTestContext(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(strings.Repeat("x", body))))
		c.Request.RemoteAddr = ip + ":1"
		mw(c)
		if c.IsAborted() {
			return w.Code
		}
		return http.StatusOK
	}
	for i, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"} {
		if got := h("/v1/webhooks/twilio?tenant=t_1", ip, 10); got != http.StatusOK {
			t.Fatalf("request %d: %d", i, got)
		}
	}
	if got := h("/v1/webhooks/twilio?tenant=t_1", "192.0.2.4", 10); got != http.StatusTooManyRequests {
		t.Fatalf("fourth request for the tenant, from a fourth address: %d, want 429", got)
	}
	if got := h("/v1/webhooks/twilio?tenant=t_2", "192.0.2.4", 10); got != http.StatusOK {
		t.Fatalf("another tenant: %d", got)
	}
	// 2 MiB = 32 units of 64 KiB: one fits the burst of 40, the second does not.
	if got := h("/v1/webhooks/sendgrid", "198.51.100.1", sendgrid.MaxWebhookBodyBytes); got != http.StatusOK {
		t.Fatalf("first 2 MiB body: %d", got)
	}
	if got := h("/v1/webhooks/sendgrid", "198.51.100.1", sendgrid.MaxWebhookBodyBytes); got != http.StatusTooManyRequests {
		t.Fatalf("second 2 MiB body: %d, want 429", got)
	}
	if got := h("/v1/webhooks/sendgrid", "198.51.100.1", 100); got != http.StatusOK {
		t.Fatalf("a small body after: %d", got)
	}
}
