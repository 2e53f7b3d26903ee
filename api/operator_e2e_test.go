package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/ids"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// opTemplate is a PUT /v1/templates body with in-app and email content.
func opTemplate(critical bool) map[string]any {
	return map[string]any{"category": "security", "critical": critical,
		"in_app": map[string]any{"title": "Code", "body": "Your code is {{.code}}"},
		"email":  map[string]any{"subject": "Code", "text": "Your code is {{.code}}"}}
}

// opLane submits a notification and returns the task queue its workflow runs on.
func opLane(t *testing.T, h *apitest.Harness, key, tenantID, templateID, n string) string {
	t.Helper()
	r := opMust(t, h, http.StatusAccepted, http.MethodPost, "/v1/notifications", key,
		map[string]any{"user_id": "ada", "template_id": templateID, "data": map[string]any{"code": n}})
	k, runID, err := ids.ParseNotificationID(r.Str("notification_id"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := h.Temporal.DescribeWorkflow(context.Background(), ids.NotificationWorkflowID(tenantID, k), runID)
	if err != nil {
		t.Fatal(err)
	}
	return d.RawResponse.GetExecutionConfig().GetTaskQueue().GetName()
}

// A tenant's key cannot raise its own API limits (or allow itself critical
// notifications): 403 operator_only naming the field, nothing saved, the limit
// still holds. Values equal to the current ones pass, so GET → PUT round-trips.
func TestTenantCannotSetItsOwnLimits(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true, TenantLimits: api.TenantLimits{RatePerSecond: 0.001, Burst: 3}})
	_, key := h.Tenant("self-raise")
	h.Template(key, apitest.SimpleTemplate("t"))
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"})
	before := string(opMust(t, h, http.StatusOK, http.MethodGet, "/v1/settings", key, nil).Body)

	for field, body := range map[string]map[string]any{
		"api_rate_per_second": {"api_rate_per_second": 100000},
		"api_burst":           {"api_burst": 1000000, "category_caps": map[string]any{"x": 1}},
		"daily_quota":         {"daily_quota": 5},
		"allow_critical":      {"allow_critical": true},
	} {
		opError(t, "PUT /v1/settings "+field, h.Do(http.MethodPut, "/v1/settings", key, body), http.StatusForbidden, "operator_only", field)
	}
	if after := string(opMust(t, h, http.StatusOK, http.MethodGet, "/v1/settings", key, nil).Body); after != before {
		t.Fatalf("a refused PUT changed the settings: %s → %s", before, after)
	}
	// The default burst of 3 still holds.
	codes := map[int]int{}
	for i := range 6 {
		codes[h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "t", "data": map[string]any{"i": i}}).Status]++
	}
	if codes[http.StatusAccepted] != 3 || codes[http.StatusTooManyRequests] != 3 {
		t.Fatalf("submissions: %v, want 3 accepted and 3 refused", codes)
	}

	// The operator raises it; the tenant reads it, may PUT it back unchanged, and
	// still cannot change it.
	h.TenantLimits(key, store.TenantLimits{APIRatePerSecond: 50, APIBurst: 100})
	r := opMust(t, h, http.StatusOK, http.MethodGet, "/v1/settings", key, nil)
	if r.JSON["api_rate_per_second"] != 50.0 || r.JSON["api_burst"] != 100.0 || r.JSON["daily_quota"] != 0.0 {
		t.Fatalf("settings after the operator's change: %s", r.Body)
	}
	r = opMust(t, h, http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{
		"category_caps": map[string]any{"news": 2}, "api_rate_per_second": 50, "api_burst": 100, "daily_quota": 0})
	if r.JSON["category_caps"].(map[string]any)["news"] != 2.0 || r.JSON["api_rate_per_second"] != 50.0 {
		t.Fatalf("round trip: %s", r.Body)
	}
	opError(t, "raise again", h.Do(http.MethodPut, "/v1/settings", key, map[string]any{"api_rate_per_second": 51}), http.StatusForbidden, "operator_only", "api_rate_per_second")
	// A PUT without the limits keeps the operator's (they are not the tenant's to reset).
	if r := opMust(t, h, http.StatusOK, http.MethodPut, "/v1/settings", key, map[string]any{}); r.JSON["api_burst"] != 100.0 {
		t.Fatalf("a PUT without limits reset them: %s", r.Body)
	}
	// The bucket refills at the new rate (50/s) up to the new depth: 300 ms is 15
	// tokens.
	time.Sleep(300 * time.Millisecond)
	if codes := submitMany(h, key, 10); codes[http.StatusAccepted] != 10 {
		t.Fatalf("after the operator raised the burst to 100: %v", codes)
	}
}

func submitMany(h *apitest.Harness, key string, n int) map[int]int {
	codes := map[int]int{}
	for i := range n {
		codes[h.Do(http.MethodPost, "/v1/notifications", key, map[string]any{"user_id": "ada", "template_id": "t", "data": map[string]any{"n": i}}).Status]++
	}
	return codes
}

// Critical templates need the operator's permission at save time, and the
// workflow is critical only while the tenant has it.
func TestCriticalNeedsTheOperatorsPermission(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	tenantID, key := h.Tenant("critical")
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"})
	normal, critical := h.TaskQueue, h.TaskQueue+"-critical"

	// Without permission: refused, nothing saved; an ordinary template is fine.
	opError(t, "critical template", h.Do(http.MethodPut, "/v1/templates/otp", key, opTemplate(true)), http.StatusForbidden, "operator_only", "critical")
	opMust(t, h, http.StatusNotFound, http.MethodGet, "/v1/templates/otp", key, nil)
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/templates/plain", key, opTemplate(false))
	// A critical template stored before the operator decided (saved before
	// migration 0011, or before a revoke) runs as an ordinary one.
	if _, err := h.Store.PutTemplate(context.Background(), tenantID, templateOf(t, opTemplate(true), "legacy")); err != nil {
		t.Fatal(err)
	}
	if lane := opLane(t, h, key, tenantID, "legacy", "1"); lane != normal {
		t.Fatalf("a critical template of a tenant without permission ran on %s, want %s", lane, normal)
	}

	// The operator grants it (operator API): saved, and critical.
	r := opMust(t, h, http.StatusOK, http.MethodPut, "/v1/operator/tenants/"+tenantID+"/limits", h.OperatorKey, map[string]any{"allow_critical": true})
	if r.JSON["allow_critical"] != true {
		t.Fatalf("grant: %s", r.Body)
	}
	if r := opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/templates/otp", key, opTemplate(true)); r.JSON["critical"] != true {
		t.Fatalf("saved: %s", r.Body)
	}
	if lane := opLane(t, h, key, tenantID, "otp", "2"); lane != critical {
		t.Fatalf("with permission the critical template ran on %s, want %s", lane, critical)
	}
	if lane := opLane(t, h, key, tenantID, "plain", "2"); lane != normal {
		t.Fatalf("an ordinary template ran on %s", lane)
	}

	// Revoked: the saved template stays, its notifications are ordinary again, and
	// a new critical version is refused.
	opMust(t, h, http.StatusOK, http.MethodPut, "/v1/operator/tenants/"+tenantID+"/limits", h.OperatorKey, map[string]any{"allow_critical": false})
	if lane := opLane(t, h, key, tenantID, "otp", "3"); lane != normal {
		t.Fatalf("after the revoke the critical template ran on %s, want %s", lane, normal)
	}
	opError(t, "critical after revoke", h.Do(http.MethodPut, "/v1/templates/otp", key, opTemplate(true)), http.StatusForbidden, "operator_only", "critical")
}

// templateOf turns an opTemplate body into a template to store directly.
func templateOf(t *testing.T, body map[string]any, id string) templates.Template {
	t.Helper()
	in, em := body["in_app"].(map[string]any), body["email"].(map[string]any)
	out := templates.Template{ID: id, Category: body["category"].(string), Critical: body["critical"].(bool),
		InApp: &templates.InAppContent{Title: in["title"].(string), Body: in["body"].(string)},
		Email: &templates.EmailContent{Subject: em["subject"].(string), Text: em["text"].(string)}}
	if errs := templates.Validate(out); len(errs) > 0 {
		t.Fatalf("template: %v", errs)
	}
	return out
}

func TestOperatorAPI(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{NoWorker: true, TenantLimits: api.TenantLimits{RatePerSecond: 200, Burst: 400}})
	tenantID, key := h.Tenant("operated")
	path := "/v1/operator/tenants/" + tenantID + "/limits"

	// Authentication: the operator key only.
	opError(t, "no key", h.Do(http.MethodGet, path, "", nil), http.StatusUnauthorized, "missing_api_key", "Authorization")
	opError(t, "tenant key", h.Do(http.MethodGet, path, key, nil), http.StatusUnauthorized, "invalid_api_key", "Authorization")
	opError(t, "wrong key", h.Do(http.MethodGet, path, h.OperatorKey+"x", nil), http.StatusUnauthorized, "invalid_api_key", "Authorization")
	opError(t, "tenant key PUT", h.Do(http.MethodPut, path, key, map[string]any{"api_rate_per_second": 100000}), http.StatusUnauthorized, "invalid_api_key", "Authorization")

	r := opMust(t, h, http.StatusOK, http.MethodGet, path, h.OperatorKey, nil)
	if string(r.Body) != `{"tenant_id":"`+tenantID+`","api_rate_per_second":0,"api_burst":0,"daily_quota":0,"max_audience_size":0,"max_concurrent_campaigns":0,"max_list_bytes":0,"allow_critical":false,"effective":{"api_rate_per_second":200,"api_burst":400,"daily_quota":0,"max_audience_size":0,"max_concurrent_campaigns":0,"max_list_bytes":268435456}}` {
		t.Fatalf("never set: %s", r.Body)
	}
	r = opMust(t, h, http.StatusOK, http.MethodPut, path, h.OperatorKey, map[string]any{"api_rate_per_second": 0.5, "api_burst": 2, "daily_quota": 10, "allow_critical": true,
		"max_audience_size": 1000, "max_concurrent_campaigns": 3, "max_list_bytes": 1 << 20})
	if string(r.Body) != `{"tenant_id":"`+tenantID+`","api_rate_per_second":0.5,"api_burst":2,"daily_quota":10,"max_audience_size":1000,"max_concurrent_campaigns":3,"max_list_bytes":1048576,"allow_critical":true,"effective":{"api_rate_per_second":0.5,"api_burst":2,"daily_quota":10,"max_audience_size":1000,"max_concurrent_campaigns":3,"max_list_bytes":1048576}}` {
		t.Fatalf("set: %s", r.Body)
	}
	if got := string(opMust(t, h, http.StatusOK, http.MethodGet, path, h.OperatorKey, nil).Body); got != string(r.Body) {
		t.Fatalf("GET after PUT: %s", got)
	}
	if r := opMust(t, h, http.StatusOK, http.MethodGet, "/v1/settings", key, nil); r.JSON["api_burst"] != 2.0 || r.JSON["daily_quota"] != 10.0 {
		t.Fatalf("the tenant reads: %s", r.Body)
	}
	// The new limits apply at once in this process (its cache was dropped).
	h.Template(key, apitest.SimpleTemplate("t"))
	opMust(t, h, http.StatusCreated, http.MethodPut, "/v1/users/ada", key, map[string]any{"email": "ada@example.com"})
	if codes := submitMany(h, key, 4); codes[http.StatusAccepted] != 2 || codes[http.StatusTooManyRequests] != 2 {
		t.Fatalf("with burst 2: %v", codes)
	}

	for _, c := range []struct {
		body        any
		code, field string
	}{
		{map[string]any{"api_rate_per_second": -1}, "invalid_field", "api_rate_per_second"},
		{map[string]any{"api_rate_per_second": 100001}, "invalid_field", "api_rate_per_second"},
		{map[string]any{"api_burst": 1000001}, "invalid_field", "api_burst"},
		{map[string]any{"daily_quota": -5}, "invalid_field", "daily_quota"},
		{map[string]any{"daily_quota": "ten"}, "invalid_type", "daily_quota"},
		{map[string]any{"api_burst": 1.5}, "invalid_type", "api_burst"},
		{map[string]any{"allow_critical": "yes"}, "invalid_type", "allow_critical"},
		{map[string]any{"max_audience_size": -1}, "invalid_field", "max_audience_size"},
		{map[string]any{"max_concurrent_campaigns": 10001}, "invalid_field", "max_concurrent_campaigns"},
		{map[string]any{"max_list_bytes": int64(1) << 40}, "invalid_field", "max_list_bytes"},
		{map[string]any{"rate": 5}, "unknown_field", "rate"},
	} {
		opError(t, "PUT", h.Do(http.MethodPut, path, h.OperatorKey, c.body), http.StatusBadRequest, c.code, c.field)
	}
	opMust(t, h, http.StatusNotFound, http.MethodGet, "/v1/operator/tenants/t_0000000000000000/limits", h.OperatorKey, nil)
	opMust(t, h, http.StatusNotFound, http.MethodPut, "/v1/operator/tenants/t_0000000000000000/limits", h.OperatorKey, map[string]any{})
	opError(t, "bad tenant id", h.Do(http.MethodGet, "/v1/operator/tenants/a%20b/limits", h.OperatorKey, nil), http.StatusBadRequest, "invalid_field", "tenant_id")
	// PUT semantics: left out is 0 / false.
	if r := opMust(t, h, http.StatusOK, http.MethodPut, path, h.OperatorKey, map[string]any{"daily_quota": 3}); r.JSON["api_burst"] != 0.0 || r.JSON["allow_critical"] != false {
		t.Fatalf("PUT replaces: %s", r.Body)
	}

	// Without HERALD_OPERATOR_KEY the operator API does not exist.
	off := apitest.Start(t, apitest.Options{NoWorker: true, NoOperatorAPI: true})
	offID, offKey := off.Tenant("no-operator")
	for _, k := range []string{"", offKey, h.OperatorKey} {
		opError(t, "operator API off", off.Do(http.MethodGet, "/v1/operator/tenants/"+offID+"/limits", k, nil), http.StatusNotFound, "not_found", "")
		opError(t, "operator API off", off.Do(http.MethodPut, "/v1/operator/tenants/"+offID+"/limits", k, map[string]any{"allow_critical": true}), http.StatusNotFound, "not_found", "")
	}
}
