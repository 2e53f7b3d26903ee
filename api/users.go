package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/unsubscribe"
)

// usersRoom holds the user profiles, their preferences and the tenant's
// preference defaults, and the one-click unsubscribe link that turns a category
// off.
type usersRoom struct {
	responder
	store       *store.Store
	users       *userDirectory
	unsubscribe *unsubscribe.Signer
	// limitsFor and uploads are the campaigns room's: an import is bounded by
	// the tenant's MaxListBytes and takes one of its upload slots, as a list
	// upload does. pushTokensPerUser is UserConfig's.
	limitsFor         func(context.Context, string) (TenantLimits, error)
	uploads           *uploadSlots
	pushTokensPerUser int
	// baseURL is how browsers reach this API (Config.PublicBaseURL); inboxCORS
	// answers the inbox's browser origins (the preference link is an inbox
	// route).
	baseURL   string
	inboxCORS gin.HandlerFunc
}

func (h *usersRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.POST("/users/import", mw.limitCost("tenant-user-import:", mw.limits.Cost.UserImport, "user imports"),
		mw.audited(auditUsersImport, auditUpload), h.importUsers)
	v1.PUT("/users/:user_id", mw.audited(auditUserPut, auditFieldNames), h.putUser)
	v1.GET("/users/:user_id", h.getUser)
	v1.PUT("/users/:user_id/preferences", mw.audited(auditPreferencesPut, auditFields), h.putUserPreferences)
	v1.GET("/users/:user_id/preferences", h.getUserPreferences)
	v1.PUT("/preferences/defaults", mw.audited(auditPreferenceDefaults, auditFields), h.putPreferenceDefaults)
	v1.GET("/preferences/defaults", h.getPreferenceDefaults)
	v1.POST(preferencesLinkRoute[len("/v1"):], h.inboxCORS, h.preferencesLink)
	public.GET(unsubscribe.PagePath, mw.limitPublic("preferences", maxBodyBytes, false), h.getPreferencePage)
	public.POST(unsubscribe.PagePath, mw.limitPublic("preferences", maxPageForm, false), h.postPreferencePage)
	public.GET(unsubscribe.Path, mw.limitPublic("unsubscribe", maxBodyBytes, false), h.getUnsubscribe)
	public.POST(unsubscribe.Path, mw.limitPublic("unsubscribe", maxBodyBytes, false), h.postUnsubscribe)
}

type putUserRequest struct {
	Name     *string `json:"name"`
	Email    *string `json:"email"`
	Phone    *string `json:"phone"`
	Locale   *string `json:"locale"`
	Timezone *string `json:"timezone"`
}

func (r putUserRequest) validate() *httpError {
	if r.Name != nil && len(*r.Name) > 200 {
		return badField("name", "invalid_field", "name must be at most 200 bytes")
	}
	if r.Email != nil {
		if err := validEmail(*r.Email); err != nil {
			return err
		}
	}
	if r.Phone != nil {
		if err := validPhone(*r.Phone); err != nil {
			return err
		}
	}
	if r.Locale != nil {
		if err := validLocale(*r.Locale); err != nil {
			return err
		}
	}
	if r.Timezone != nil {
		if err := validTimezone(*r.Timezone); err != nil {
			return err
		}
	}
	return nil
}

// putUser creates or replaces a user's profile (PUT semantics: omitted fields are cleared).
func (h *usersRoom) putUser(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		h.abort(c, err)
		return
	}
	var req putUserRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	if err := req.validate(); err != nil {
		h.abort(c, err)
		return
	}
	u, created, err := h.store.UpsertUser(c.Request.Context(), store.User{
		TenantID: tenantOf(c).ID, UserID: userID, Name: req.Name, Email: req.Email,
		Phone: req.Phone, Locale: req.Locale, Timezone: req.Timezone,
	})
	if err != nil {
		h.abort(c, err)
		return
	}
	locale := ""
	if req.Locale != nil {
		locale = *req.Locale
	}
	h.users.remember(tenantOf(c).ID, userID, locale)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, u)
}

func (h *usersRoom) getUser(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		h.abort(c, err)
		return
	}
	u, err := h.store.GetUser(c.Request.Context(), tenantOf(c).ID, userID)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("user"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

// userDirectory answers whether a tenant's user exists, and the user's
// locale, for the accept path and every /v1/users/{user_id}/... route; positive
// answers are cached briefly (a profile saved through this process updates its
// entry at once).
type userDirectory struct {
	responder
	store *store.Store
	// known maps tenant/user of a user known to exist to the user's locale; nil
	// when Config.AuthCacheTTL is 0.
	known *expirable.LRU[string, string]
}

func newUserDirectory(r responder, st *store.Store, cacheTTL time.Duration) *userDirectory {
	d := &userDirectory{responder: r, store: st}
	if cacheTTL > 0 {
		d.known = expirable.NewLRU[string, string](100_000, nil, cacheTTL)
	}
	return d
}

// remember records that the user exists with locale (saved through this process).
func (d *userDirectory) remember(tenantID, userID, locale string) {
	if d.known != nil {
		d.known.Add(tenantID+"/"+userID, locale)
	}
}

// knownUser validates the path's user_id and answers 404 for a user the tenant does
// not have (another tenant's user looks exactly like a missing one).
func (d *userDirectory) knownUser(c *gin.Context) (tenantID, userID string, ok bool) {
	userID = c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		d.abort(c, err)
		return "", "", false
	}
	tenantID = tenantOf(c).ID
	if sub, ok := tokenUser(c); ok && sub != userID {
		// A user token opens its own user's inbox only; another user's looks
		// exactly like a missing one.
		d.abort(c, notFound("user"))
		return "", "", false
	}
	exists, err := d.userExists(c, tenantID, userID)
	if err != nil {
		d.abort(c, err)
		return "", "", false
	}
	if !exists {
		d.abort(c, notFound("user"))
		return "", "", false
	}
	return tenantID, userID, true
}

// userExists is the accept path's recipient check; positive answers are cached briefly.
func (d *userDirectory) userExists(c *gin.Context, tenantID, userID string) (bool, error) {
	_, ok, err := d.userLocale(c, tenantID, userID)
	return ok, err
}

// userLocale is the user's locale ("" when unset) and whether the user exists,
// for the accept path: the locale picks the template variant rendered at submit
// time, as the worker will pick it. Positive answers are cached briefly (a
// profile saved through this process updates its entry at once).
func (d *userDirectory) userLocale(c *gin.Context, tenantID, userID string) (string, bool, error) {
	key := tenantID + "/" + userID
	if d.known != nil {
		if locale, ok := d.known.Get(key); ok {
			return locale, true, nil
		}
	}
	u, err := d.store.GetUser(c.Request.Context(), tenantID, userID)
	if errors.Is(err, herald.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	locale := ""
	if u.Locale != nil {
		locale = *u.Locale
	}
	if d.known != nil {
		d.known.Add(key, locale)
	}
	return locale, true, nil
}
