package api

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/time/rate"

	"github.com/herald-notify/herald/internal/ratelimit"
)

// Rate is a token bucket: PerSecond tokens refilled, Burst deep. PerSecond < 0
// turns the bucket off; zero means the default.
type Rate struct {
	PerSecond float64
	Burst     int
}

// PublicLimits limit the endpoints that take no API key (the webhooks and the
// unsubscribe link), which do work — read a body, look up a key, check a
// signature or a token — for anyone who asks.
//
// The buckets are in process (golang.org/x/time/rate), not in PostgreSQL like
// the per-tenant API limits (internal/ratelimit): a PostgreSQL bucket costs a
// database round trip and a row write per request, so a flood of forged requests
// would turn into database load, the very thing to prevent; here a refusal costs
// a map lookup. The price: each API replica has its own buckets, so N replicas
// let N times the rate through — for abuse protection (not a quota) that is
// enough. The keys are bounded: at most Keys buckets are kept (least recently
// used first out, and an idle bucket, full again, after a minute), so a caller
// inventing keys costs at most Keys small buckets of memory.
type PublicLimits struct {
	// PerIP limits every request to those endpoints by source address (the TCP
	// peer: X-Forwarded-For is not trusted, so behind a proxy every caller is
	// the proxy). Webhooks and unsubscribe links have separate buckets. A
	// request costs one token per bodyUnit of its Content-Length started (a
	// body of unknown length costs the endpoint's largest), so the bytes a
	// source may make the API read and scan are limited too: a 2 MiB batch
	// costs 32 requests' worth.
	PerIP Rate
	// PerTenant limits webhook requests by the tenant their URL names.
	PerTenant Rate
	// Keys caps the buckets kept; zero means the default.
	Keys int
}

// bodyUnit is the body size one PerIP token pays for.
const bodyUnit = 64 << 10

// defaultPublicLimits are well above what providers post (Twilio posts one
// callback per message status, SendGrid batches its events), so they only stop
// floods.
var defaultPublicLimits = PublicLimits{
	PerIP:     Rate{PerSecond: 100, Burst: 200},
	PerTenant: Rate{PerSecond: 500, Burst: 1000},
	Keys:      10_000,
}

// publicLimiter holds the buckets of PublicLimits.
type publicLimiter struct {
	limits PublicLimits
	mu     sync.Mutex
	keys   *expirable.LRU[string, *rate.Limiter]
}

func newPublicLimiter(l PublicLimits) *publicLimiter {
	d := defaultPublicLimits
	if l.PerIP.PerSecond == 0 {
		l.PerIP = d.PerIP
	}
	if l.PerTenant.PerSecond == 0 {
		l.PerTenant = d.PerTenant
	}
	if l.Keys <= 0 {
		l.Keys = d.Keys
	}
	return &publicLimiter{limits: l, keys: expirable.NewLRU[string, *rate.Limiter](l.Keys, nil, time.Minute)}
}

// take takes n tokens from the bucket key (created full); when there are too
// few it returns how long until there will be enough.
func (p *publicLimiter) take(key string, n int, r Rate, now time.Time) (ok bool, retryAfter time.Duration) {
	if r.PerSecond < 0 {
		return true, 0
	}
	burst := max(1, r.Burst)
	n = min(n, burst) // a request larger than the bucket costs the whole bucket
	p.mu.Lock()
	lim, found := p.keys.Get(key)
	if !found {
		lim = rate.NewLimiter(rate.Limit(r.PerSecond), burst)
		p.keys.Add(key, lim)
	}
	p.mu.Unlock()
	res := lim.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}

// empty reports whether the bucket key has less than one token now (without
// taking any) and, if so, how long until it has one.
func (p *publicLimiter) empty(key string, r Rate, now time.Time) (bool, time.Duration) {
	if r.PerSecond < 0 {
		return false, 0
	}
	p.mu.Lock()
	lim, found := p.keys.Get(key)
	p.mu.Unlock()
	if !found {
		return false, 0
	}
	if tokens := lim.TokensAt(now); tokens < 1 {
		return true, time.Duration((1 - tokens) / r.PerSecond * float64(time.Second))
	}
	return false, 0
}

// limitPublic is the middleware of the endpoints that take no API key: group
// names the per-IP bucket ("webhook", "unsubscribe"), maxBody is the largest
// body the endpoint reads (what a body of unknown length is charged as);
// byTenant also limits by the `tenant` query parameter, when present. Over a
// limit: 429 rate_limited with Retry-After, before any work.
func (m *middleware) limitPublic(group string, maxBody int64, byTenant bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		now := time.Now()
		l := m.public.limits
		size := c.Request.ContentLength
		if size < 0 {
			size = maxBody
		}
		units := max(1, int((min(size, maxBody)+bodyUnit-1)/bodyUnit))
		if ok, retry := m.public.take(group+" ip "+c.RemoteIP(), units, l.PerIP, now); !ok {
			m.abortRateLimited(c, retry, fmt.Sprintf("more than %g requests per second from this address", l.PerIP.PerSecond))
			return
		}
		if tenant := c.Query("tenant"); byTenant && tenant != "" {
			if ok, retry := m.public.take(group+" tenant "+tenant, 1, l.PerTenant, now); !ok {
				m.abortRateLimited(c, retry, fmt.Sprintf("more than %g requests per second for this tenant", l.PerTenant.PerSecond))
				return
			}
		}
	}
}

func (m *middleware) abortRateLimited(c *gin.Context, retry time.Duration, what string) {
	c.Header("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(retry)))
	m.abort(c, &httpError{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: what + "; retry after the Retry-After seconds"})
}
