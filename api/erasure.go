package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/workflows"
)

// erasureRoom erases a user (DELETE /v1/users/{user_id}) and reports the
// tenant's data usage (GET /v1/usage). What is erased and what is kept
// anonymised: docs/erasure.md.
type erasureRoom struct {
	responder
	store *store.Store
	users *userDirectory
	// erasureKey keys the anonymous id (store.ErasedUserID).
	erasureKey []byte
	// usage caches each tenant's usage for usageCacheTTL: its queries are
	// bounded, but a dashboard polling it need not repeat them.
	usage *expirable.LRU[string, store.Usage]
	// workflows deletes the erased user's closed runs from namespace.
	workflows *workflows.Client
	namespace string
}

// erasedRunsPerRequest bounds the closed Temporal runs one erasure deletes
// (the rest age out with the namespace's retention: docs/erasure.md).
const erasedRunsPerRequest = 1000

// usageCacheTTL is how long a tenant's usage is served from the cache.
const usageCacheTTL = time.Minute

func newErasureRoom(r responder, st *store.Store, users *userDirectory, erasureKey []byte, wf *workflows.Client, namespace string) *erasureRoom {
	if namespace == "" {
		namespace = "default"
	}
	return &erasureRoom{responder: r, store: st, users: users, erasureKey: erasureKey, workflows: wf, namespace: namespace,
		usage: expirable.NewLRU[string, store.Usage](10_000, nil, usageCacheTTL)}
}

func (h *erasureRoom) register(v1, _ gin.IRouter, mw *middleware) {
	v1.DELETE("/users/:user_id", h.deleteUser)
	v1.GET("/usage", h.getUsage)
}

// deleteUserResponse is DELETE /v1/users/{user_id}'s answer.
type deleteUserResponse struct {
	UserID string `json:"user_id"`
	Status string `json:"status"`
	store.ErasureResult
	// TemporalRunsDeleted is how many of the user's closed workflow runs were
	// deleted from Temporal; TemporalRunsMore says more remain (they age out
	// with the namespace's retention); TemporalError says the deletion failed
	// (the database erasure stands).
	TemporalRunsDeleted int    `json:"temporal_runs_deleted"`
	TemporalRunsMore    bool   `json:"temporal_runs_more"`
	TemporalError       string `json:"temporal_error,omitempty"`
	DurationMs          int64  `json:"duration_ms"`
}

// deleteUser erases the user synchronously in bounded batches and answers
// 200 with what it did per table. The audit entry names the user by the
// anonymous id only (the erasure also rewrites the user's earlier entries),
// and is written ahead of the change as every audited change is.
func (h *erasureRoom) deleteUser(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		h.abort(c, err)
		return
	}
	t := tenantOf(c)
	erasedID := store.ErasedUserID(h.erasureKey, t.ID, userID)
	details, _ := json.Marshal(map[string]string{"erased_id": erasedID})
	auditID, err := h.store.BeginAudit(c.Request.Context(), t.ID, store.AuditEntry{
		APIKeyID: t.APIKeyID, Action: auditUserDelete, Target: "user_id=" + erasedID, Details: details})
	if err != nil {
		h.log.Error("writing the audit log failed; the erasure was not attempted", "tenant_id", t.ID, "error", err)
		c.Header("Retry-After", "1")
		h.abort(c, &httpError{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable",
			Message: "the change could not be recorded in the audit log, so it was not made; retry"})
		return
	}
	start := time.Now()
	// The erasure runs to its end even if the client goes away: every batch
	// is committed on its own and a retry resumes.
	ctx := context.WithoutCancel(c.Request.Context())
	res, err := h.store.EraseUser(ctx, t.ID, userID, erasedID, 0)
	h.users.forget(t.ID, userID)
	status := http.StatusOK
	switch {
	case errors.Is(err, herald.ErrNotFound):
		status = http.StatusNotFound
	case err != nil:
		status = http.StatusInternalServerError
	}
	if ferr := h.store.FinishAudit(ctx, t.ID, auditID, status, status != http.StatusNotFound); ferr != nil {
		h.log.Error("completing the audit log entry failed; it stays pending", "tenant_id", t.ID, "id", auditID, "error", ferr)
	}
	if status == http.StatusNotFound {
		h.abort(c, notFound("user"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	out := deleteUserResponse{UserID: userID, Status: "erased", ErasureResult: res}
	if h.workflows != nil {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out.TemporalRunsDeleted, out.TemporalRunsMore, err = h.workflows.DeleteClosedUserRuns(tctx, h.namespace, t.ID, userID, erasedRunsPerRequest)
		cancel()
		if err != nil {
			h.log.Warn("deleting an erased user's closed runs failed", "tenant_id", t.ID, "error", err)
			out.TemporalError = "deleting the user's closed workflow runs failed; they age out with the namespace's retention"
		}
	}
	out.DurationMs = time.Since(start).Milliseconds()
	c.JSON(http.StatusOK, out)
}

// forget drops the cached answer that the user exists (an erasure or a
// delete through this process takes effect at once here; other processes
// forget it within Config.AuthCacheTTL).
func (d *userDirectory) forget(tenantID, userID string) {
	if d.known != nil {
		d.known.Remove(tenantID + "/" + userID)
	}
}

// getUsage answers the tenant's rows, bytes and oldest row per table
// (store.TenantUsage: exact counts up to 10,000 rows a table, estimates
// above; bytes estimated from the table's average row), cached a minute.
func (h *erasureRoom) getUsage(c *gin.Context) {
	t := tenantOf(c)
	if u, ok := h.usage.Get(t.ID); ok {
		c.JSON(http.StatusOK, u)
		return
	}
	u, err := h.store.TenantUsage(c.Request.Context(), t.ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	// The whole tables' totals are every tenant's: the operator's view (herald
	// data usage) shows them, a tenant's does not.
	for i := range u.Tables {
		u.Tables[i].TableRows, u.Tables[i].TableBytes = 0, 0
	}
	h.usage.Add(t.ID, u)
	c.JSON(http.StatusOK, u)
}
