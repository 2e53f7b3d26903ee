package api

import (
	"fmt"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/store"
)

// maxCategoryCap bounds one category cap (notifications per user per rolling 24 h).
const maxCategoryCap = 1_000_000

// categoryName is templates.Validate's rule for a template category.
var categoryName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// userPreferencesView is a user's preference document and what it amounts to.
type userPreferencesView struct {
	UserID string `json:"user_id"`
	// Preferences are the user's own choices, exactly as last PUT (empty when the
	// user never set any).
	Preferences preferences.Preferences `json:"preferences"`
	// Effective is Preferences merged over the tenant defaults: what gates the
	// user's notifications now.
	Effective preferences.Preferences `json:"effective"`
}

type settingsView struct {
	CategoryCaps  map[string]int                        `json:"category_caps"`
	DefaultLocale string                                `json:"default_locale"`
	RetryPolicies map[herald.Channel]herald.RetryPolicy `json:"retry_policies"`
	// OrderingMaxHold is the tenant's effective max_hold (docs/ordering.md).
	OrderingMaxHold string `json:"ordering_max_hold"`
	// API limits on POST /v1/notifications, the operator's (read-only here); 0
	// means the server default.
	APIRatePerSecond float64 `json:"api_rate_per_second"`
	APIBurst         int     `json:"api_burst"`
	DailyQuota       int     `json:"daily_quota"`
	// Retention is what the tenant's rows are kept for (its own settings where
	// it has them, the operator's otherwise); RetentionMax the operator's, the
	// longest it may set (read-only).
	Retention    retentionView `json:"retention"`
	RetentionMax retentionView `json:"retention_max"`
}

// decodePreferences reads and validates a preference document: 400 with the first
// problem's field, and every problem in errors.
func (h *usersRoom) decodePreferences(c *gin.Context) (preferences.Preferences, bool) {
	var p preferences.Preferences
	if err := decodeJSON(c, &p); err != nil {
		h.abort(c, err)
		return p, false
	}
	if errs := p.Validate(); len(errs) > 0 {
		msg := errs[0].Error()
		if len(errs) > 1 {
			msg = fmt.Sprintf("%s (and %d more problems, see errors)", msg, len(errs)-1)
		}
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": validationError{
			Code: "invalid_field", Message: msg, Field: errs[0].Field, Errors: errs,
		}})
		return p, false
	}
	return p, true
}

// putUserPreferences replaces a user's preference document (PUT semantics: a key
// left out inherits the tenant default). 404 for an unknown user.
func (h *usersRoom) putUserPreferences(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	p, ok := h.decodePreferences(c)
	if !ok {
		return
	}
	if err := h.store.PutPreferences(c.Request.Context(), tenantID, userID, p); err != nil {
		h.abort(c, err)
		return
	}
	h.answerUserPreferences(c, tenantID, userID)
}

// getUserPreferences returns the user's own document and the effective one; a
// user who never set any has an empty document. 404 for an unknown user.
func (h *usersRoom) getUserPreferences(c *gin.Context) {
	tenantID, userID, ok := h.users.knownUser(c)
	if !ok {
		return
	}
	h.answerUserPreferences(c, tenantID, userID)
}

func (h *usersRoom) answerUserPreferences(c *gin.Context, tenantID, userID string) {
	ctx := c.Request.Context()
	own, err := h.store.GetPreferences(ctx, tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	ts, err := h.store.GetTenantSettings(ctx, tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, userPreferencesView{UserID: userID, Preferences: own, Effective: preferences.Merge(ts.PreferenceDefaults, own)})
}

// putPreferenceDefaults replaces the tenant-wide default preference document.
func (h *usersRoom) putPreferenceDefaults(c *gin.Context) {
	p, ok := h.decodePreferences(c)
	if !ok {
		return
	}
	tenantID := tenantOf(c).ID
	ctx := c.Request.Context()
	if err := h.store.UpdateTenantSettings(ctx, tenantID, func(ts *store.TenantSettings) { ts.PreferenceDefaults = p }); err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

// getPreferenceDefaults returns the tenant-wide default preference document
// (empty when never set).
func (h *usersRoom) getPreferenceDefaults(c *gin.Context) {
	ts, err := h.store.GetTenantSettings(c.Request.Context(), tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, ts.PreferenceDefaults)
}
