package api

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

type previewRequest struct {
	// Data is decoded by decodeData, as on the accept path.
	Data    json.RawMessage `json:"data"`
	Locale  *string         `json:"locale"`
	Version *int            `json:"version"`
}

// previewTemplate renders every channel of a template with sample data, exactly as
// a delivery would: sanitized email HTML, the SMS text with its encoding and
// segment count (GSM-7 or UCS-2), the push payload size against FCM's limit.
func (h *templatesRoom) previewTemplate(c *gin.Context) {
	id := c.Param("template_id")
	if err := validTemplateID(id); err != nil {
		h.abort(c, err)
		return
	}
	var req previewRequest
	if err := decodeJSON(c, &req); err != nil {
		h.abort(c, err)
		return
	}
	data, derr := decodeData(req.Data)
	if derr != nil {
		h.abort(c, derr)
		return
	}
	version := 0
	if req.Version != nil {
		if *req.Version < 1 {
			h.abort(c, badField("version", "invalid_field", "version must be a positive integer"))
			return
		}
		version = *req.Version
	}
	locale := ""
	if req.Locale != nil {
		if err := validLocale(*req.Locale); err != nil {
			h.abort(c, err)
			return
		}
		locale = *req.Locale
	}
	rec, ok := h.templateVersion(c, id, version)
	if !ok {
		return
	}
	t := rec.Template
	if missing := templates.MissingVariables(t, "", data); len(missing) > 0 {
		h.abort(c, missingVariablesError(missing))
		return
	}
	ts, err := h.store.GetTenantSettings(c.Request.Context(), tenantOf(c).ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	resolved := templates.ResolveLocale(locale, t.AvailableLocales(), ts.DefaultLocale)
	out := map[herald.Channel]templates.Rendered{}
	for _, ch := range t.Channels() {
		// The accept path's check: what previews is what a notification may carry.
		r, err := checkRender(t, ch, resolved, data)
		if err != nil {
			h.abort(c, err)
			return
		}
		out[ch] = r
	}
	c.JSON(http.StatusOK, gin.H{"template_id": t.ID, "version": t.Version, "locale": resolved, "channels": out})
}
