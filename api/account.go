package api

import (
	"github.com/gin-gonic/gin"
	"github.com/herald-notify/herald/internal/retention"

	"github.com/herald-notify/herald/internal/store"
)

// accountRoom is the tenant's own account: its API keys, its audit log and its
// settings, and the operator's view of it (its limits).
type accountRoom struct {
	responder
	store *store.Store
	// auth forgets a revoked key at once in this process.
	auth *authenticator
	// settings forgets a tenant whose limits the operator changed.
	settings *settingsCache
	// defaults are the server's tenant limits (LimitConfig.Tenant).
	defaults TenantLimits
	// retention is the operator's retention policy (Config.Retention).
	retention retention.Policy
	// ordering bounds the tenant's ordering_max_hold (Config.Ordering).
	ordering OrderingConfig
}

func (h *accountRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.GET("/api-keys", h.listAPIKeys)
	v1.POST("/api-keys", mw.audited(auditAPIKeyCreate, auditFields), h.createAPIKey)
	v1.DELETE("/api-keys/:api_key_id", mw.audited(auditAPIKeyRevoke, auditFields), h.revokeAPIKey)
	v1.PUT("/settings", mw.audited(auditSettingsPut, auditFields), h.putSettings)
	v1.GET("/settings", h.getSettings)
	v1.GET("/audit-log", h.listAuditLog)
	op := public.Group("/v1/operator", mw.operatorAuth)
	op.GET("/tenants/:tenant_id/limits", h.getTenantLimits)
	op.PUT("/tenants/:tenant_id/limits", mw.audited(auditTenantLimitsPut, auditFields), h.putTenantLimits)
}
