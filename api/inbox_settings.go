package api

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/store"
)

// Per-tenant CORS for the inbox (GET/PUT /v1/inbox/settings).
//
// Browsers call the inbox endpoints with a user token, never with the tenant's
// API key. A preflight (OPTIONS) of an inbox path is answered for any origin: it
// carries no credentials, so the tenant is not known yet, and it grants nothing
// by itself. The real request is where the tenant's allowed origins are
// enforced: from an origin the tenant did not allow (and that is not Herald's
// own) it is refused with 403 origin_not_allowed and no Access-Control-Allow-
// Origin, so neither its effect nor its answer reaches the page. Allowed
// origins are echoed one by one with Vary: Origin; never "*", and no cookies are
// involved (Access-Control-Allow-Credentials is never sent).

// maxAllowedOrigins bounds a tenant's allowed origins.
const maxAllowedOrigins = 50

type inboxSettingsRequest struct {
	AllowedOrigins *[]string `json:"allowed_origins"`
	// Branding, when given, replaces the hosted pages' branding
	// (preference_centre.go); absent, it is kept.
	Branding *store.Branding `json:"branding"`
}

type inboxSettingsResponse struct {
	AllowedOrigins []string       `json:"allowed_origins"`
	HMACSecretSet  bool           `json:"hmac_secret_set"`
	Branding       store.Branding `json:"branding"`
	UpdatedAt      *time.Time     `json:"updated_at"`
}

func (h *inboxRoom) getInboxSettings(c *gin.Context) {
	st, err := h.store.GetInboxSettings(c.Request.Context(), tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	h.answerSettings(c, st)
}

// answerSettings answers the settings with the tenant's branding.
func (h *inboxRoom) answerSettings(c *gin.Context, st store.InboxSettings) {
	b, err := h.store.GetInboxBranding(c.Request.Context(), tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	r := settingsResponse(st)
	r.Branding = b
	c.JSON(http.StatusOK, r)
}

func settingsResponse(st store.InboxSettings) inboxSettingsResponse {
	r := inboxSettingsResponse{AllowedOrigins: st.AllowedOrigins, HMACSecretSet: st.HMACSecret != nil}
	if !st.UpdatedAt.IsZero() {
		r.UpdatedAt = &st.UpdatedAt
	}
	return r
}

func (h *inboxRoom) putInboxSettings(c *gin.Context) {
	var req inboxSettingsRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	if req.AllowedOrigins == nil {
		h.abort(c, badField("allowed_origins", "missing_field", "allowed_origins is required (an empty list allows none)"))
		return
	}
	if len(*req.AllowedOrigins) > maxAllowedOrigins {
		h.abort(c, badField("allowed_origins", "invalid_field", "at most %d allowed origins", maxAllowedOrigins))
		return
	}
	origins := []string{}
	for _, o := range *req.AllowedOrigins {
		n, ok := normalizeOrigin(o)
		if !ok {
			h.abort(c, badField("allowed_origins", "invalid_field",
				"%q is not an origin: give scheme://host[:port] with scheme http or https, no path, no wildcard", truncateID(o)))
			return
		}
		if !slices.Contains(origins, n) {
			origins = append(origins, n)
		}
	}
	if req.Branding != nil {
		if err := validBranding(*req.Branding); err != nil {
			h.abort(c, err)
			return
		}
	}
	tenantID := tenantOf(c).ID
	if err := h.store.PutInboxAllowedOrigins(c.Request.Context(), tenantID, origins); err != nil {
		h.abort(c, err)
		return
	}
	if req.Branding != nil {
		if err := h.store.PutInboxBranding(c.Request.Context(), tenantID, *req.Branding); err != nil {
			h.abort(c, err)
			return
		}
	}
	h.origins.Remove(tenantID)
	st, err := h.store.GetInboxSettings(c.Request.Context(), tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	h.answerSettings(c, st)
}

// normalizeOrigin returns the origin as browsers send it (lower-case scheme and
// host, no default port), or false for anything that is not exactly an origin.
func normalizeOrigin(o string) (string, bool) {
	if len(o) > 255 || strings.ContainsAny(o, "*\\ ") {
		return "", false
	}
	u, err := url.Parse(o)
	if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.ForceQuery {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", false
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, true
}

// allowedOrigins is a tenant's list, cached for a few seconds (the process
// that saves it evicts at once).
func (h *inboxRoom) allowedOrigins(c *gin.Context, tenantID string) ([]string, error) {
	if v, ok := h.origins.Get(tenantID); ok {
		return v, nil
	}
	st, err := h.store.GetInboxSettings(c.Request.Context(), tenantID)
	if err != nil {
		return nil, err
	}
	h.origins.Add(tenantID, st.AllowedOrigins)
	return st.AllowedOrigins, nil
}

// inboxCORS runs on the inbox routes after authentication: a user token's
// request from a browser origin must come from an origin the tenant allowed.
func (h *inboxRoom) inboxCORS(c *gin.Context) {
	if _, ok := tokenUser(c); !ok || c.GetHeader("Origin") == "" {
		return
	}
	tenantID := tenantOf(c).ID
	origins, err := h.allowedOrigins(c, tenantID)
	if err != nil {
		h.abort(c, err)
		return
	}
	h.corsAllowed(c, tenantID, origins)
}

// corsAllowed answers the CORS headers for an allowed origin (or none at all),
// or refuses the request with 403 and returns false.
func (h *inboxRoom) corsAllowed(c *gin.Context, tenantID string, origins []string) bool {
	origin := c.GetHeader("Origin")
	if origin == "" {
		return true
	}
	c.Header("Vary", "Origin")
	n, ok := normalizeOrigin(origin)
	if ok && (slices.Contains(origins, n) || h.ownOrigin(c, n)) {
		c.Header("Access-Control-Allow-Origin", origin)
		return true
	}
	h.abort(c, &httpError{Status: http.StatusForbidden, Code: "origin_not_allowed", Field: "Origin",
		Message: "this origin is not in the tenant's inbox allowed_origins (PUT /v1/inbox/settings)"})
	return false
}

// ownOrigin: the page was served by Herald itself (the demo page).
func (h *inboxRoom) ownOrigin(c *gin.Context, origin string) bool {
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	if self, ok := normalizeOrigin(scheme + "://" + c.Request.Host); ok && self == origin {
		return true
	}
	if h.baseURL != "" {
		if pub, err := url.Parse(h.baseURL); err == nil {
			if self, ok := normalizeOrigin(pub.Scheme + "://" + pub.Host); ok && self == origin {
				return true
			}
		}
	}
	return false
}

// preflight answers a CORS preflight of an inbox path (see above); every other
// request goes on.
func preflight(c *gin.Context) {
	if c.Request.Method != http.MethodOptions || c.GetHeader("Origin") == "" || c.GetHeader("Access-Control-Request-Method") == "" {
		return
	}
	if !isInboxPath(c.Request.URL.Path) {
		return
	}
	h := c.Writer.Header()
	h.Set("Access-Control-Allow-Origin", c.GetHeader("Origin"))
	h.Set("Access-Control-Allow-Methods", "GET, POST")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	h.Add("Vary", "Origin")
	c.AbortWithStatus(http.StatusNoContent)
}

// isInboxPath: /v1/users/{user_id}/inbox[/...] and /v1/inbox/session.
func isInboxPath(p string) bool {
	if p == "/v1/inbox/session" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "/v1/users/")
	if !ok {
		return false
	}
	_, tail, ok := strings.Cut(rest, "/")
	return ok && (tail == "inbox" || strings.HasPrefix(tail, "inbox/"))
}
