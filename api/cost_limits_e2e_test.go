package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
)

// Every endpoint that costs work has a per-tenant bucket of its own: a flood is
// refused with 429 rate_limited and Retry-After once the burst is used, other
// tenants and the tenant's other endpoints are not affected.
func TestCostlyEndpointsAreRateLimited(t *testing.T) {
	t.Parallel()
	slow := func(burst int) api.Bucket { return api.Bucket{RatePerSecond: 0.001, Burst: burst} } // no refill during the test
	h := apitest.Start(t, apitest.Options{NoWorker: true, CostLimits: api.CostLimits{
		Preview: slow(5), TemplateSave: slow(4), Redrive: slow(3), BulkRedrive: slow(2),
		CampaignCreate: slow(3), UserImport: slow(2)}})
	_, key := h.Tenant("flood")
	_, other := h.Tenant("flood-other")
	h.Template(key, apitest.SimpleTemplate("t"))
	h.Template(other, apitest.SimpleTemplate("t"))
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"})

	preview := func(k string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/templates/t/preview", k, map[string]any{"data": map[string]any{"title": "x"}})
	}
	save := func(k string, i int) apitest.Response {
		return h.Do(http.MethodPut, fmt.Sprintf("/v1/templates/s%d", i), k, opTemplate(false))
	}
	redrive := func(k string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/dead-letters/12345/redrive", k, nil)
	}
	bulk := func(k string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/dead-letters/redrive", k, map[string]any{})
	}
	// A campaign the tenant may not send (an unknown template) still costs the
	// checks before the refusal, so it takes a token as an accepted one would.
	campaign := func(k string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/campaigns", k, map[string]any{
			"template_id": "missing", "audience": map[string]any{"all_users": true}})
	}
	userImport := func(k string) apitest.Response {
		return h.Do(http.MethodPost, "/v1/users/import", k, `{"user_id":"imported","email":"imp@example.com"}`+"\n", "Content-Type", "application/x-ndjson")
	}

	for _, c := range []struct {
		name  string
		burst int
		ok    int
		do    func(i int) apitest.Response
	}{
		{"preview", 5, http.StatusOK, func(int) apitest.Response { return preview(key) }},
		{"template save", 4, http.StatusCreated, func(i int) apitest.Response { return save(key, i) }},
		{"redrive", 3, http.StatusNotFound, func(int) apitest.Response { return redrive(key) }}, // an unknown dead letter still costs the lookup
		{"bulk redrive", 2, http.StatusAccepted, func(int) apitest.Response { return bulk(key) }},
		{"campaign create", 3, http.StatusUnprocessableEntity, func(int) apitest.Response { return campaign(key) }},
		{"user import", 2, http.StatusOK, func(int) apitest.Response { return userImport(key) }},
	} {
		for i := range c.burst + 3 {
			r := c.do(i)
			if i < c.burst {
				if r.Status != c.ok {
					t.Fatalf("%s %d (within the burst of %d): %d %s", c.name, i+1, c.burst, r.Status, r.Body)
				}
				continue
			}
			opError(t, fmt.Sprintf("%s %d (after the burst of %d)", c.name, i+1, c.burst), r, http.StatusTooManyRequests, "rate_limited", "")
			if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
				t.Fatalf("%s: Retry-After %q", c.name, r.Header.Get("Retry-After"))
			}
		}
	}
	// Refused saves saved nothing.
	opMust(t, h, http.StatusNotFound, http.MethodGet, "/v1/templates/s5", key, nil)

	// Another tenant has buckets of its own.
	if r := preview(other); r.Status != http.StatusOK {
		t.Fatalf("other tenant's preview: %d %s", r.Status, r.Body)
	}
	if r := save(other, 0); r.Status != http.StatusCreated {
		t.Fatalf("other tenant's save: %d %s", r.Status, r.Body)
	}
	if r := bulk(other); r.Status != http.StatusAccepted {
		t.Fatalf("other tenant's bulk redrive: %d %s", r.Status, r.Body)
	}
	if r := userImport(other); r.Status != http.StatusOK {
		t.Fatalf("other tenant's user import: %d %s", r.Status, r.Body)
	}
	// The flooded tenant's other endpoints still answer: reading, and sending.
	opMust(t, h, http.StatusOK, http.MethodGet, "/v1/templates/t", key, nil)
	opMust(t, h, http.StatusAccepted, http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "t"})
}
