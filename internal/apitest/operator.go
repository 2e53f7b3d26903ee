package apitest

import (
	"context"
	"net/http"

	"github.com/herald-notify/herald/internal/store"
)

// tenantIDOf is the id of the tenant that owns key.
func (h *Harness) tenantIDOf(key string) string {
	h.T.Helper()
	tn, err := h.Store.TenantByAPIKey(context.Background(), key)
	if err != nil {
		h.T.Fatalf("tenant of key: %v", err)
	}
	return tn.ID
}

// TenantLimits sets the operator's limits of the tenant that owns key through the
// operator API (PUT /v1/operator/tenants/{id}/limits, which also drops the API's
// cached settings of the tenant at once) and returns the tenant's id. Without an
// operator API (NoOperatorAPI) it writes them to the store as `herald tenant
// limits` does; the API then sees them within its settings cache's 5 s.
func (h *Harness) TenantLimits(key string, l store.TenantLimits) string {
	h.T.Helper()
	id := h.tenantIDOf(key)
	if h.OperatorKey == "" {
		if err := h.Store.PutTenantLimits(context.Background(), id, l); err != nil {
			h.T.Fatalf("tenant limits: %v", err)
		}
		return id
	}
	if r := h.Do(http.MethodPut, "/v1/operator/tenants/"+id+"/limits", h.OperatorKey, l); r.Status != http.StatusOK {
		h.T.Fatalf("PUT /v1/operator/tenants/%s/limits: %d %s", id, r.Status, r.Body)
	}
	return id
}

// AllowCritical lets the tenant that owns key send critical notifications,
// keeping its other limits (see TenantLimits).
func (h *Harness) AllowCritical(key string) {
	h.T.Helper()
	l, err := h.Store.GetTenantLimits(context.Background(), h.tenantIDOf(key))
	if err != nil {
		h.T.Fatalf("tenant limits: %v", err)
	}
	l.AllowCritical = true
	h.TenantLimits(key, l)
}
